"""The ``audit`` command line: parses options, calls one command function, maps errors to exit codes."""

from __future__ import annotations

import sys

import click

from audit import __version__
from audit.contract import Exit
from audit.errors import AuditError, RegistryError

COMPILE_BACKEND = click.option("--compile-backend", default="aot_eager", show_default=True,
                               type=click.Choice(["aot_eager", "inductor", "eager"]),
                               help="torch.compile backend of the compile check (aot_eager: Dynamo and "
                                    "AOTAutograd, fast; inductor: the real code generator, slow to compile).")
class Format(click.Choice):
    """A ``--format`` choice with one spelling per format across commands, and the usual aliases
    (``markdown`` for ``md``, ``terminal`` for ``text``)."""

    ALIASES = {"markdown": "md", "terminal": "text"}

    def convert(self, value, param, ctx):
        return super().convert(self.ALIASES.get(value, value), param, ctx)


OUTPUT_FORMAT = click.option("--format", "output_format", type=Format(["text", "github", "json", "sarif"]),
                             default="text", show_default=True,
                             help="text (alias terminal): the report; github: error annotations at each failing "
                                  "entry's registry line before it, and a job summary when $GITHUB_STEP_SUMMARY "
                                  "is set; json: the matrix on stdout; sarif: SARIF 2.1.0 on stdout (code "
                                  "scanning).")
VERBOSITY = click.option("-v", "--verbose", "verbosity", count=True,
                         help="-v: also every skip, unsupported, waived and xpass cell with its reason.")
QUIET = click.option("-q", "--quiet", is_flag=True, help="Only the failures and the verdict (no table, no progress).")
REGISTRY = click.option("--registry", "registry", default="registry.yaml", show_default=True,
                        type=click.Path(dir_okay=False), help="The registry file.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="autograd-audit")
@click.pass_context
def cli(ctx) -> None:
    """Prove custom autograd code in PyTorch is correct.

    Settings may live in pyproject.toml under [tool.autograd-audit] (registry, out, profile, jobs,
    examples, seed, devices, compile_backend, timeout, unclaimed_timeout, max_memory, strict, cache, cache_dir,
    cache_size, progress), found from any folder below it; options given here win.
    """
    from pathlib import Path

    from audit.config import default_map

    try:
        found = default_map(Path.cwd())
    except AuditError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(Exit.USAGE))
    ctx.default_map = {**found, **(ctx.default_map or {})}


@cli.command("run")
@REGISTRY
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="Folder for matrix.json, matrix.md and replay scripts.")
@click.option("--select", multiple=True, help="Entry names or glob patterns (repeatable).")
@click.option("--check", "checks", multiple=True, help="Only these checks (repeatable).")
@click.option("--device", "devices", multiple=True, type=click.Choice(["cpu", "cuda", "mps"]),
              help="Only these devices (repeatable).")
@click.option("--examples", default=20, show_default=True, type=click.IntRange(1), help="Examples per claimed cell.")
@click.option("--seed", default=0, show_default=True, type=int, help="The run's seed; recorded in the matrix.")
@click.option("-j", "--jobs", default=1, show_default=True, type=click.IntRange(1), help="Worker processes.")
@click.option("--timeout", default=300.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per check before the worker is killed (a worker's start-up, importing torch and "
                   "the target, has its own budget: the longer of 120 s and this).")
@click.option("--unclaimed-timeout", default=30.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Seconds per unclaimed cell (never more than --timeout): it cannot fail the gate, so a probe "
                   "that hangs is not waited for as long as a claimed check.")
@click.option("--max-memory", default="8G", show_default=True, help="Memory cap per worker (e.g. 512M, 4G; 0: none).")
@COMPILE_BACKEND
@click.option("--strict", is_flag=True, help="skip and xpass cells fail the gate too.")
@click.option("--progress", type=click.Choice(["auto", "on", "off"]), default="auto", show_default=True,
              help="A progress bar on a terminal (auto), a line per entry otherwise.")
@click.option("--profile", default=None,
              help="premerge (10 examples, cache on), intake (the defaults), upgrade (50 examples, inductor, "
                   "no cache), or one from the registry's profiles; flags given here win.")
@click.option("--cache/--no-cache", default=False, show_default=True,
              help="Reuse cells whose spec, code, check, torch, Python, device, seed and examples are unchanged.")
@click.option("--cache-dir", default=None, type=click.Path(file_okay=False),
              help="Where cached cells live (default: .audit-cache beside the registry).")
@click.option("--cache-size", default="512M", show_default=True, help="Bound on the cache; least recently used go.")
@click.option("--shard", default=None, metavar="K/N", help="Audit only the K-th of N deterministic shards of the "
                                                             "entries (merge the shards with audit merge).")
@click.option("--durations", default=None, type=click.Path(dir_okay=False),
              help="An earlier matrix whose recorded seconds balance the shards (else: by entry count).")
@OUTPUT_FORMAT
@VERBOSITY
@QUIET
@click.pass_context
def run_command(ctx, **options) -> None:
    """Audit the registry: write the matrix and reports, exit 1 if the gate fails."""
    from audit.commands.run import run

    explicit = {name for name in options if ctx.get_parameter_source(name) in _GIVEN}
    _exit(lambda: run(**options, explicit=frozenset(explicit)))


@cli.command("validate")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
def validate_command(files) -> None:
    """Check registry files against schema v1 (no torch import: fit for pre-commit)."""
    from audit.commands.validate import validate

    _exit(lambda: validate(files or ("registry.yaml",)))


@cli.command("list")
@REGISTRY
@click.option("--select", multiple=True, help="Entry names or glob patterns (repeatable).")
def list_command(registry: str, select) -> None:
    """List entries, their owners and the cells an audit would run."""
    from audit.commands.listing import listing

    _exit(lambda: listing(registry, select))


@cli.command("repro")
@click.argument("entry")
@click.argument("check")
@REGISTRY
@click.option("--dtype", default=None, help="The cell's dtype (default: the check's first).")
@click.option("--device", default="cpu", show_default=True)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--examples", default=20, show_default=True, type=click.IntRange(1))
@click.option("--matrix", default="reports/matrix.json", show_default=True, type=click.Path(dir_okay=False),
              help="Replay the shrunk case stored here when it matches; else search again.")
@click.option("--failure", default=1, show_default=True, type=click.IntRange(1),
              help="Which of the cell's distinct failures to replay (its 'also:' lines are 2, 3).")
@COMPILE_BACKEND
def repro_command(**options) -> None:
    """Re-run one cell's shrunk failing case and print its inputs and the mismatch."""
    from audit.commands.repro import repro

    _exit(lambda: repro(**options))


@cli.command("diff")
@click.argument("old", type=click.Path(dir_okay=False))
@click.argument("new", type=click.Path(dir_okay=False))
@click.option("--format", "output_format", type=Format(["text", "md", "json"]), default="text",
              show_default=True, help="text for a terminal or CI log, md (alias markdown) for a PR comment, json "
                                      "for tools.")
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def diff_cli(**options) -> None:
    """Compare two matrices (old environment, new environment): exit 1 on any regression."""
    from audit.commands.diff import diff_command

    _exit(lambda: diff_command(**options))


@cli.command("merge")
@click.argument("shards", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="Folder for the merged matrix.json, matrix.md and the shards' replay scripts.")
@click.option("--strict", is_flag=True, help="skip and xpass cells fail the gate too.")
@OUTPUT_FORMAT
def merge_cli(**options) -> None:
    """Combine shard matrices into one; exit 2 if a shard is missing or the shards disagree."""
    from audit.commands.merge import merge_command

    _exit(lambda: merge_command(**options))


@cli.command("report")
@click.argument("matrix_path", metavar="MATRIX", type=click.Path(dir_okay=False))
@click.option("--format", "output_format", type=Format(["text", "md", "html", "junit", "github", "json", "sarif"]),
              default="text", show_default=True, help="The report to render (md: alias markdown).")
@click.option("--by-owner", is_flag=True, help="One table per owner.")
@VERBOSITY
@QUIET
@click.option("--out", default=None, type=click.Path(dir_okay=False), help="Write here instead of stdout.")
def report_cli(**options) -> None:
    """Re-render a saved matrix in any format (exit 0: rendering does not gate)."""
    from audit.commands.report import report

    _exit(lambda: report(**options))


@cli.command("scan")
@click.argument("model", required=False)
@click.option("--source", multiple=True, type=click.Path(exists=True),
              help="Read these files or folders instead of (or as well as) running MODEL (repeatable).")
@click.option("--input-shape", multiple=True, help="When MODEL returns only a module: one per input, e.g. 2,8.")
@click.option("--dtype", default="float32", show_default=True, help="dtype of the random inputs --input-shape makes.")
@REGISTRY
@click.option("--format", "output_format", type=Format(["text", "json"]), default="text", show_default=True)
@click.option("--write", is_flag=True, help="Append a registry stub for each unregistered item (comments kept).")
def scan_cli(**options) -> None:
    """Find custom Functions and ops a model uses (MODEL: pkg.module:build returning (model, inputs)) or
    its sources define; exit 1 if any is not registered."""
    from audit.commands.scan import scan

    _exit(lambda: scan(**options))


@cli.command("init")
@click.option("--dir", "directory", default=".", show_default=True, type=click.Path(file_okay=False))
def init_cli(directory: str) -> None:
    """Scaffold registry.yaml, checks/, reports/ and a CI workflow in a repository without a registry."""
    from audit.commands.init import init

    _exit(lambda: init(directory))


@cli.command("schema")
def schema_command() -> None:
    """Print the path of the registry's JSON Schema (for the yaml-language-server modeline)."""
    from audit.registry.schema import schema_path

    click.echo(schema_path())


#: Where a setting counts as chosen, so that it wins over a profile's: the command line, the environment
#: and pyproject.toml's [tool.autograd-audit] (click's default map).
_GIVEN = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT,
          click.core.ParameterSource.DEFAULT_MAP)


def _exit(command) -> None:
    """Run a command function and exit with its code; the one place errors become exit codes."""
    try:
        code = command()
    except RegistryError as exc:
        click.echo(str(exc), err=True)
        count = len(exc.problems)
        click.echo(f"{count} problem{'s' if count != 1 else ''} in the registry; nothing was run", err=True)
        code = Exit.USAGE
    except AuditError as exc:
        click.echo(f"error: {exc}", err=True)
        code = Exit.USAGE
    except KeyboardInterrupt:
        click.echo("interrupted: nothing was written", err=True)
        code = Exit.INTERRUPTED
    except Terminated:
        click.echo("terminated (SIGTERM): workers ended, nothing was written", err=True)
        code = Exit.TERMINATED
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torch":
            code = _crashed(exc)
        else:
            click.echo("error: this command needs PyTorch, which is not installed here: install the build your "
                       "project uses (pip install torch, or autograd-audit[torch]); audit validate works without it",
                       err=True)
            code = Exit.USAGE
    except Exception as exc:  # the audit's own bug: exit 2 ("nothing judged"), never 1 ("gate failed")
        code = _crashed(exc)
    sys.exit(int(code))


def _crashed(exc: Exception) -> int:
    from audit.crash import write_log
    from audit.errors import first_line

    log = write_log(exc)
    where = f"; the traceback and the environment are in {log}" if log else ""
    click.echo(f"error: the audit itself failed ({type(exc).__name__}: {first_line(exc)[:300]}){where}; "
               "please report it", err=True)
    return Exit.USAGE


class Terminated(BaseException):
    """SIGTERM arrived (a CI job cancelled, a container stopped): unwound like Ctrl-C, so every worker
    and rank is ended on the way out and nothing is half-written."""


def _terminate(signum, frame) -> None:
    raise Terminated()


def main() -> None:
    """Console-script entry point."""
    import signal

    signal.signal(signal.SIGTERM, _terminate)
    cli(prog_name="audit", auto_envvar_prefix="AUDIT")

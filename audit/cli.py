"""The ``audit`` command line: parses options, calls one command function, maps errors to exit codes."""

from __future__ import annotations

import sys
from typing import ClassVar

import click

from audit import __version__
from audit.core.contract import Exit
from audit.core.errors import AuditError, RegistryError
from audit.runtime.settings import Settings, declared


class Format(click.Choice):
    """A ``--format`` choice with one spelling per format across commands, and the usual aliases
    (``markdown`` for ``md``, ``terminal`` for ``text``)."""

    ALIASES: ClassVar[dict[str, str]] = {"markdown": "md", "terminal": "text"}

    def convert(self, value, param, ctx):
        return super().convert(self.ALIASES.get(value, value), param, ctx)


def setting_option(name: str, cls: type = Settings, **overrides):
    """The click option of the run setting ``name``, made from its declaration in ``cls``
    (:mod:`audit.runtime.settings`): flag, type, default and help; ``overrides`` for a command that takes it with
    another help."""
    found = next(d for d in declared(cls) if d.name == name)
    return click.option(*_declarations(found), name, **{**_shape(found), **overrides})


def _declarations(found) -> tuple[str, ...]:
    """The flags of a setting: a switch is one ``--x/--no-x`` declaration."""
    flags = found.setting.flags or (found.flag,)
    return (f"{found.flag}/--no-{found.flag[2:]}",) if found.setting.switch else flags


def _shape(found) -> dict:
    """click's keywords for a setting: a flag, a count, or a value of its type (repeatable for a tuple)."""
    meta = found.setting
    if found.type is bool and not meta.switch:
        return {"is_flag": True, "help": meta.help}
    if meta.count:
        return {"count": True, "help": meta.help}
    shown = not found.repeated and found.default is not None
    return {"default": found.default, "show_default": shown, "multiple": found.repeated, "type": _type(found),
            "metavar": meta.metavar, "help": meta.help}


def _type(found):
    """The click type of a setting's values: its choices, a path, a bounded number, or its Python type."""
    meta = found.setting
    if meta.choices:
        return (Format if meta.aliases else click.Choice)(list(meta.choices))
    if meta.path:
        return click.Path(dir_okay=meta.path != "file", file_okay=meta.path != "dir")
    if found.type in (int, float) and meta.minimum is not None:
        bounded = click.IntRange if found.type is int else click.FloatRange
        return bounded(min=meta.minimum, min_open=meta.exclusive)
    return found.type if found.type in (int, float, bool) else click.STRING


def setting_options(cls: type = Settings):
    """A decorator adding every run setting of ``cls`` as an option, in declaration order (``audit run``)."""
    def add(function):
        for found in reversed(declared(cls)):
            function = setting_option(found.name, cls)(function)
        return function

    return add


def _cli_help() -> str:
    from audit.app.config import KEYS

    return f"""Prove custom autograd code in PyTorch is correct.

    Settings may live in pyproject.toml under [tool.autograd-audit] ({', '.join(KEYS)}), found from any folder
    below it; options given here win.
    """


@click.group(context_settings={"help_option_names": ["-h", "--help"]}, help=_cli_help())
@click.version_option(__version__, prog_name="autograd-audit")
@click.pass_context
def cli(ctx) -> None:
    from pathlib import Path

    from audit.app.config import default_map

    try:
        found = default_map(Path.cwd())
    except AuditError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(int(Exit.USAGE))
    ctx.default_map = {**found, **(ctx.default_map or {})}


@cli.command("run")
@setting_options()
@click.pass_context
def run_command(ctx, **options) -> None:
    """Audit the registry: write the matrix and reports, exit 1 if the gate fails."""
    from audit.commands.run import run

    def given(sources) -> dict:
        return {name: value for name, value in options.items() if ctx.get_parameter_source(name) in sources}

    _exit(lambda: run(flags=given(FLAGS), pyproject=given(PYPROJECT)))


@cli.command("validate")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
def validate_command(files) -> None:
    """Check registry files against schema v1 (no torch import: fit for pre-commit)."""
    from audit.commands.validate import validate

    _exit(lambda: validate(files or ("registry.yaml",)))


@cli.command("list")
@setting_option("registry")
@click.option("--select", multiple=True, help="Entry names or glob patterns (repeatable).")
def list_command(registry: str, select) -> None:
    """List entries, their owners and the cells an audit would run."""
    from audit.commands.listing import listing

    _exit(lambda: listing(registry, select))


@cli.command("repro")
@click.argument("entry")
@click.argument("check")
@setting_option("registry")
@click.option("--dtype", default=None, help="The cell's dtype (default: the check's first).")
@click.option("--device", default="cpu", show_default=True)
@setting_option("seed", help=None)
@setting_option("examples", help=None)
@click.option("--matrix", default="reports/matrix.json", show_default=True, type=click.Path(dir_okay=False),
              help="Replay the shrunk case stored here when it matches; else search again.")
@click.option("--failure", default=1, show_default=True, type=click.IntRange(1),
              help="Which of the cell's distinct failures to replay (its 'also:' lines are 2, 3).")
@setting_option("compile_backend")
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
@click.option("--slowdown", type=click.FloatRange(min=1.0, min_open=True), default=None, metavar="FACTOR",
              help="With behaviour records: a forward and backward slower by this factor (beyond the measured noise) "
                   "fails the gate too (default: cost never gates).")
def diff_cli(**options) -> None:
    """Compare two matrices (old environment, new environment), and their behaviour records where both runs made
    one: exit 1 on any regression."""
    from audit.commands.diff import diff_command

    _exit(lambda: diff_command(**options))


@cli.command("recheck")
@click.argument("entry")
@click.option("--against", required=True, type=click.Path(file_okay=False), metavar="OLD_OUT",
              help="The old environment's reports folder (its matrix.json and behaviour record).")
@setting_option("registry")
@click.option("--dtype", default=None, help="Only this dtype.")
def recheck_cli(**options) -> None:
    """Record one entry's behaviour here again and compare it with an old record: the replay of a behaviour change
    audit diff reported; exit 1 while it moves."""
    from audit.commands.recheck import recheck

    _exit(lambda: recheck(**options))


@cli.command("merge")
@click.argument("shards", nargs=-1, required=True, type=click.Path(dir_okay=False))
@setting_option("out", help="Folder for the merged matrix.json, matrix.md and the shards' replay scripts.")
@setting_option("strict")
@setting_option("output_format")
def merge_cli(**options) -> None:
    """Combine shard matrices into one; exit 2 if a shard is missing or the shards disagree."""
    from audit.commands.merge import merge_command

    _exit(lambda: merge_command(**options))


@cli.command("report")
@click.argument("matrix_path", metavar="MATRIX", type=click.Path(dir_okay=False))
@click.option("--format", "output_format", type=Format(["text", "md", "html", "junit", "github", "json", "sarif"]),
              default="text", show_default=True, help="The report to render (md: alias markdown).")
@click.option("--by-owner", is_flag=True, help="One table per owner.")
@click.option("--owner", default=None, metavar="OWNER", help="This owner's causes of failure first (@vision).")
@setting_option("verbosity")
@setting_option("quiet")
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
@setting_option("registry")
@click.option("--format", "output_format", type=Format(["text", "json"]), default="text", show_default=True)
@click.option("--write", is_flag=True, help="Append a registry stub for each unregistered item (comments kept), and "
                                           "for a kind model factory the model's own entry.")
@click.option("--explain", is_flag=True, help="Say why each value a stub holds was chosen (domains, dims, dtypes).")
def scan_cli(**options) -> None:
    """Find custom Functions and ops a model uses (MODEL: pkg.module:build returning (model, make_batch, loss) as a
    kind model factory does, (model, inputs), or a module) or its sources define; exit 1 if any is not
    registered."""
    from audit.commands.scan import scan

    _exit(lambda: scan(**options))


@cli.command("mutate")
@click.argument("entries", nargs=-1)
@setting_option("registry")
@setting_option("jobs")
@setting_option("seed", help=None)
@setting_option("examples", help=None)
@setting_option("timeout", help=None)
@setting_option("cache", help="Reuse the audit's cells and mutants already judged (a mutant is keyed by its source, "
                              "the entry, the code, torch and the seed).")
@setting_option("cache_dir")
@setting_option("shard", help="Mutate only the K-th of N deterministic shards of the entries (1/4): each entry's kill "
                              "rate, and the gate, is whole in one shard.")
@click.option("--out", default="reports", show_default=True, type=click.Path(file_okay=False),
              help="Folder for mutation.json, mutation.md and mutation.html.")
@click.option("--format", "output_format", type=Format(["text", "md", "json"]), default="text", show_default=True,
              help="The report shown (md: alias markdown).")
@click.option("--min-kill-rate", type=click.FloatRange(0, 1), default=None, metavar="RATE",
              help="Exit 1 when an entry's kill rate is under RATE (0 to 1): the gate.")
@click.option("--limit", type=click.IntRange(1), default=None, help="At most this many mutants per entry.")
@click.option("--check", "checks", multiple=True, help="Judge mutants with these checks only (repeatable).")
@click.option("--operator", "operators", multiple=True, metavar="GLOB",
              help="Only the mutants whose operator matches (repeatable): 'scale*', 'constant*', 'swap*'.")
@click.option("-v", "--verbose", is_flag=True, help="Each mutant's fate as it is decided, and every equivalent and "
                                                   "errored mutant in the report.")
def mutate_cli(**options) -> None:
    """Plant one gradient bug at a time in each entry's Python backward (and forward, jvp, setup_context), run its
    claimed checks on each mutant, and report which the audit missed: each entry's kill rate."""
    from audit.commands.mutate import mutate_command

    _exit(lambda: mutate_command(**options))


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


#: Where each tier of the run's settings comes from (see audit.runtime.settings.settle): a flag is given on the
#: command line or in an AUDIT_RUN_* environment variable; pyproject.toml's [tool.autograd-audit] reaches click as
#: its default map.
FLAGS = (click.core.ParameterSource.COMMANDLINE, click.core.ParameterSource.ENVIRONMENT)
PYPROJECT = (click.core.ParameterSource.DEFAULT_MAP,)


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
    from audit.app.crash import write_log
    from audit.core.errors import first_line

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

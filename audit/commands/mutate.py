"""``audit mutate``: plant one gradient bug at a time in each selected entry's Python source, run its claimed checks
on each, and report what survived; with ``--min-kill-rate``, a gate (exit 1 under it)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from audit.app import shard as shard_mod
from audit.commands.select import checks_dir, run_table, select_checks, select_entries
from audit.core.contract import Exit
from audit.core.errors import UsageError
from audit.core.io import write_atomic
from audit.registry.load import load_registry


def mutate_command(*, entries: tuple[str, ...], registry: str, jobs: int, seed: int, examples: int, timeout: float,
                   cache: bool, cache_dir: str | None, out: str, output_format: str, min_kill_rate: float | None,
                   limit: int | None, shard: str | None, verbose: bool, checks: tuple[str, ...] = (),
                   operators: tuple[str, ...] = ()) -> int:
    """Mutate the selected entries (all without ``entries``); write ``mutation.json``, ``.md`` and ``.html`` to
    ``out``, show the report in ``output_format``; the exit code is the kill-rate gate's."""
    from audit.commands.run import _require_torch
    from audit.mutate.engine import mutate
    from audit.mutate.results import to_json
    from audit.reporters.mutation import html, markdown, text
    from audit.runtime.options import RunOptions
    from audit.runtime.scratch import run_root
    from audit.runtime.settings import Settings

    loaded = load_registry(registry)
    _require_torch()
    chosen = select_entries(loaded, entries)
    if not chosen:
        raise UsageError("nothing selected: no entry matches " + ", ".join(entries))
    if shard:  # by entry, as audit run shards: each entry's kill rate, and so the gate, is whole in one shard
        index, count = shard_mod.parse(shard)
        mine = set(shard_mod.split([e.name for e in chosen], count)[index - 1])
        chosen = [e for e in chosen if e.name in mine]
    settings = Settings(registry=registry, jobs=jobs, seed=seed, examples=examples, timeout=timeout, cache=cache,
                        cache_dir=cache_dir)
    options = RunOptions.of(settings, base=str(Path(registry).resolve().parent), checks_dir=str(checks_dir(loaded)),
                            triton_interpret=any(e.triton == "interpret" for e in chosen))
    table = run_table(loaded, options.cache_dir)
    only = select_checks(table, checks)
    with run_root():
        run = mutate(loaded, chosen, table, options, min_kill_rate=min_kill_rate, limit=limit,
                     only=only, operators=operators,
                     on_progress=lambda line: click.echo(line, err=True) if verbose else None)
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(folder / "mutation.json", json.dumps(to_json(run), indent=2) + "\n")
    write_atomic(folder / "mutation.md", markdown(run))
    write_atomic(folder / "mutation.html", html(run))
    shown = {"text": lambda: text(run, verbose), "md": lambda: markdown(run),
             "json": lambda: json.dumps(to_json(run), indent=2) + "\n"}[output_format]()
    click.echo(shown, nl=False)
    return Exit.GATE_FAILED if run.below() else Exit.OK

"""``audit run``: registry to matrix, reports and replay scripts; the exit code is the gate."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from audit.app import profiles
from audit.app import shard as shard_mod
from audit.app import outlock
from audit.app import publish
from audit.commands.select import checks_dir, resources_selected, run_table, select_checks, select_entries
from audit.core.contract import Exit, Status
from audit.core.errors import UsageError
from audit.core.io import write_atomic
from audit.app.publish import drop_stale_scripts, show
from audit.registry.load import load_registry
from audit.core.replays import script_name
from audit.engine.timeline import stamp
from audit.results.matrix import Matrix, build, read_matrix
from audit.runtime.settings import Settings, settle


def run(flags: Mapping[str, Any], pyproject: Mapping[str, Any] | None = None) -> int:
    """Audit the selected entries; write ``matrix.json``, ``matrix.md`` and replay scripts to the chosen folder.

    ``flags`` are the settings given on the command line, ``pyproject`` those of ``[tool.autograd-audit]``; the
    chosen profile fills in below them, the defaults below it (:func:`audit.runtime.settings.settle`).
    """
    pyproject = pyproject or {}
    chosen = settle(flags, pyproject)  # which registry and which profile: no profile sets them
    loaded = load_registry(chosen.registry)  # first: a bad registry is refused before torch is imported
    _require_torch()
    named = profiles.profile(chosen.profile, loaded)
    settings = settle(flags, pyproject, dict(named.values), profile_name=named.name)
    with outlock.exclusive(Path(settings.out)):  # one writer per --out, from the start: a second run is refused
        return _audit(loaded, settings)


def _audit(loaded, settings: Settings) -> int:
    """Audit ``loaded``'s selected entries under ``settings``; the gate's exit code."""
    from audit.runtime.options import RunOptions
    from audit.runtime.scratch import run_root

    entries = select_entries(loaded, settings.select)
    _check_against(settings)
    split = None
    if settings.shard:
        entries, split = _shard(entries, settings.shard, settings.durations)
    options = RunOptions.of(settings, base=str(Path(settings.registry).resolve().parent),
                            checks_dir=str(checks_dir(loaded)),
                            triton_interpret=any(e.triton == "interpret" for e in entries))
    with run_root():  # what every worker and rank writes, removed with it on the way out, whatever ends the run
        result = _computed(loaded, entries, settings, options)
    if result is not None and not result.entries and not split:
        raise UsageError("nothing selected: no entry has a cell for the chosen checks and devices")
    if result is None:
        result = _empty_result()
    matrix = build(result, loaded, options, strict=settings.strict, shard=split,
                   fail_unverified=settings.fail_unverified)
    if settings.record and result.entries:
        matrix = _recorded(matrix, loaded, entries, settings, options)
    show(matrix, settings.output_format, -1 if settings.quiet else settings.verbosity,  # shown even if out fails
         settings.owner)
    _write(Path(settings.out), matrix, result, settings.owner)
    stamp("written")
    if options.cache_dir:
        click.echo(f"cache: {result.cached} of {result.cached + result.computed} cells reused from "
                   f"{options.cache_dir}; {result.computed} computed", err=True)
    return Exit.GATE_FAILED if matrix.verdict == "fail" else Exit.OK


def _computed(loaded, entries, settings: Settings, options):
    """The engine's result for ``entries`` (None when there are none)."""
    from audit.engine.pool import prestart

    stamp("begin")  # the command line read, the registry loaded: the engine starts
    from audit.engine.runner import audit_entries
    from audit.app.progress import progress as make_progress

    # Workers import torch while this process plans: the two overlap. With the cache on, most runs need no
    # worker at all, so none is started ahead. The first starts the per-worker resources (the distributed
    # check's ranks) the selected checks may need.
    workers = [] if options.cache_dir or not entries else prestart(options, min(options.jobs, len(entries)),
                                                                     resources=resources_selected(settings.checks))
    try:
        table = run_table(loaded, options.cache_dir)  # declarations: no torch while the cache serves every cell
        only = select_checks(table, settings.checks)
        with make_progress("quiet" if settings.quiet else settings.progress) as reporter:
            return audit_entries(loaded, entries, table, options, only=only, devices=set(settings.devices) or None,
                                 on_event=reporter, workers=workers, out=settings.out) if entries else None
    finally:
        for worker in workers:
            worker.close()


def _recorded(matrix: Matrix, loaded, entries, settings: Settings, options) -> Matrix:
    """``matrix`` naming the behaviour record of ``entries`` written beside it (``--record``)."""
    import dataclasses

    from audit.behaviour.recorder import record

    against = Path(settings.against) / "behaviour" if settings.against else None
    devices = tuple(d for d in (matrix.environment or {}).get("devices", ["cpu"])
                    if not settings.devices or d in settings.devices)
    key = record(loaded, entries, Path(settings.out), options, devices, matrix.environment or {}, against)
    return dataclasses.replace(matrix, behaviour=key)


def _check_against(settings: Settings) -> None:
    """Refuse ``--against`` without ``--record``, or naming a folder without a record, before anything runs."""
    if not settings.against:
        return
    if not settings.record:
        raise UsageError("--against loads an old record's checkpoints into a new record: give --record too "
                         "(or --profile upgrade)")
    if not (Path(settings.against) / "behaviour" / "manifest.json").is_file():
        raise UsageError(f"--against {settings.against}: no behaviour record there (expected "
                         f"{Path(settings.against) / 'behaviour' / 'manifest.json'}; record the old environment "
                         "with audit run --record)")


def _require_torch() -> None:
    """Refuse the run (the CLI says what to install) where torch is not installed. This process never imports
    it, and workers that cannot would each die at start-up, turning every cell into an error."""
    if importlib.util.find_spec("torch") is None:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")


def _shard(entries, text: str, durations_path):
    """This shard's entries and the ``shard`` record for its matrix."""
    index, count = shard_mod.parse(text)
    names = [e.name for e in entries]
    recorded = shard_mod.durations(read_matrix(durations_path)) if durations_path else None
    mine = set(shard_mod.split(names, count, recorded)[index - 1])
    return [e for e in entries if e.name in mine], {"index": index, "count": count, "selected": names}


def _empty_result():
    """What an empty shard reports: no entries, and the environment every shard must agree on."""
    from audit.engine.runner import RunResult
    from audit.engine.worker import environment

    return RunResult(entries=(), environment=environment())


#: The cells that get a replay script: a claim that failed (waived or not). An unclaimed property that does
#: not hold (``unsupported``) is no failure, and its probe's case is not shrunk.
REPLAYED = (Status.FAIL, Status.WAIVED)


def _write(out: Path, matrix: Matrix, result, owner: str | None = None) -> None:
    scripts = {script_name(entry.entry.name, cell.check, cell.dtype, cell.device, number): script
               for entry in result.entries for cell in entry.cells if cell.status in REPLAYED
               for number, script in enumerate(cell.scripts(), 1)}
    for name, script in scripts.items():
        write_atomic(out / "repro" / name, script)
    drop_stale_scripts(out, set(scripts))
    publish.write_all(out, matrix, owner)

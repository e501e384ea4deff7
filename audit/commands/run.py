"""``audit run``: registry to matrix, reports and replay scripts; the exit code is the gate."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import click

from audit import profiles
from audit import shard as shard_mod
from audit import outlock
from audit import publish
from audit.commands.select import checks_dir, one_worker_selected, run_table, select_checks, select_entries
from audit.contract import Exit, Status
from audit.errors import UsageError
from audit.io import write_atomic
from audit.profiles import settle
from audit.publish import drop_stale_scripts, show
from audit.registry.load import load_registry
from audit.replays import script_name
from audit.results.matrix import Matrix, build, read_matrix


def run(registry, out, select, checks, devices, examples, seed, jobs, timeout, max_memory, strict,
        progress, compile_backend="aot_eager", profile=None, cache=False, cache_dir=None, cache_size="512M",
        shard=None, durations=None, output_format="text", explicit=frozenset(), verbosity=0, quiet=False,
        unclaimed_timeout=30.0) -> int:
    """Audit the selected entries; write ``matrix.json``, ``matrix.md`` and replay scripts to ``out``.

    ``explicit`` names the options given on the command line: those win over the ``profile``'s values.
    """
    loaded = load_registry(registry)  # first: a bad registry is refused before torch is imported
    _require_torch()
    with outlock.exclusive(Path(out)):  # one writer per --out, from the start: a second run is refused at once
        from audit.runtime.options import RunOptions
        from audit.engine.pool import prestart
        from audit.engine.runner import audit_entries
        from audit.progress import progress as make_progress

        settled = settle(dict(examples=examples, compile_backend=compile_backend, cache=cache, timeout=timeout,
                              strict=strict), set(explicit), profiles.profile(profile, loaded))
        entries = select_entries(loaded, select)
        split = None
        if shard:
            entries, split = _shard(entries, shard, durations)
        base = Path(registry).resolve().parent
        options = RunOptions(examples=settled["examples"], seed=seed, timeout=settled["timeout"],
                             unclaimed_timeout=unclaimed_timeout,
                             max_memory=parse_size(max_memory, "--max-memory"), jobs=jobs, base=str(base),
                             checks_dir=str(checks_dir(loaded)), compile_backend=settled["compile_backend"],
                             cache_dir=str(Path(cache_dir) if cache_dir else base / ".audit-cache") if settled["cache"] else None,
                             cache_size=parse_size(cache_size, "--cache-size"),
                             triton_interpret=any(e.triton == "interpret" for e in entries))
        # Workers import torch while this process plans: the two overlap. With the cache on, most runs need no
        # worker at all, so none is started ahead. The first forks the distributed ranks when the run may have
        # distributed cells.
        workers = [] if options.cache_dir or not entries else prestart(options, min(jobs, len(entries)),
                                                                         ranks=one_worker_selected(checks))
        try:
            table = run_table(loaded)  # declarations: the parent imports no torch while the cache serves every cell
            only = select_checks(table, checks)
            with make_progress("quiet" if quiet else progress) as reporter:
                result = audit_entries(loaded, entries, table, options, only=only, devices=set(devices) or None,
                                       on_event=reporter, workers=workers, out=str(out)) if entries else None
        finally:
            for worker in workers:
                worker.close()
        if result is not None and not result.entries and not split:
            raise UsageError("nothing selected: no entry has a cell for the chosen checks and devices")
        if result is None:
            result = _empty_result()
        matrix = build(result, loaded, options, strict=settled["strict"], shard=split)
        show(matrix, output_format, -1 if quiet else verbosity)  # first: shown even when --out cannot be written
        _write(Path(out), matrix, result)
        if options.cache_dir:
            click.echo(f"cache: {result.cached} of {result.cached + result.computed} cells reused from "
                       f"{options.cache_dir}; {result.computed} computed", err=True)
        return Exit.GATE_FAILED if matrix.verdict == "fail" else Exit.OK


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


def _write(out: Path, matrix: Matrix, result) -> None:
    scripts = {script_name(entry.entry.name, cell.check, cell.dtype, cell.device, number): script
               for entry in result.entries for cell in entry.cells if cell.status in REPLAYED
               for number, script in enumerate(cell.scripts(), 1)}
    for name, script in scripts.items():
        write_atomic(out / "repro" / name, script)
    drop_stale_scripts(out, set(scripts))
    publish.write_all(out, matrix)


def parse_size(text: str, option: str = "--max-memory") -> int:
    """``"512M"``, ``"4G"``, ``"1024"`` (bytes) or ``"0"`` (no cap) to bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise UsageError(f"{option}: expected a size like 512M or 4G, got {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)

"""The engine's entry point: plan every entry's cells, run them in workers, judge, stream progress."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from audit.contract import DEVICE_ORDER, DTYPE_ORDER
from audit.engine.cache import Cache, audit_digest, cell_key, code_fingerprint
from audit.engine.plan import claims, plan
from audit.engine.pool import run_jobs
from audit.engine.worker import environment as local_environment
from audit.registry.load import today
from audit.registry.model import Entry, Registry
from audit.replays import script_command, script_name
from audit.results.cells import Cell, judge
from audit.runtime.options import RunOptions


@dataclass(frozen=True)
class EntryResult:
    """An audited entry: the digest of its target and its judged cells in matrix order."""

    entry: Entry
    digest: str | None
    cells: tuple[Cell, ...]
    target_error: str = ""


@dataclass(frozen=True)
class Event:
    """Progress, as the engine streams it: an entry began, a cell was judged, an entry ended. ``done`` and
    ``total`` count entries, ``cells_done`` and ``cells_total`` cells (cached ones included)."""

    kind: str
    entry: Entry
    cell: Cell | None = None
    result: EntryResult | None = None
    done: int = 0
    total: int = 0
    cells_done: int = 0
    cells_total: int = 0


@dataclass(frozen=True)
class RunResult:
    """Every audited entry, in registry order, the workers' environment, and what the cache served."""

    entries: tuple[EntryResult, ...]
    environment: dict
    cached: int = 0
    computed: int = 0


@dataclass(frozen=True)
class Finished:
    """How an entry's target loaded: its digest, or why it could not be loaded."""

    digest: str | None
    target_error: str = ""


def run(registry: Registry, entries: list[Entry], checks: dict, options: RunOptions, *,
        only=None, devices=None, on_event=lambda event: None, workers=None, out: str | None = None) -> RunResult:
    """Audit ``entries``; never prints. Cells are judged as they arrive and streamed to ``on_event``.
    ``out``: the folder the caller writes replay scripts to, which a cell's further failures name.

    With ``options.cache_dir``, cells whose every input is unchanged are served from the result cache,
    and only the rest go to workers; an entry with nothing left to compute starts no worker. ``workers``
    already started (see :func:`audit.engine.pool.prestart`) are used, or closed when none is needed.
    """
    jobs = [_job(entry, checks, options, only, devices) for entry in entries]
    jobs = [job for job in jobs if job["cells"]]
    results: dict[str, EntryResult] = {}
    ctx = {"done": 0, "total": len(jobs), "registry": registry.path, "seed": options.seed, "checks": checks,
           "backend": options.compile_backend, "cache": None, "cells_done": 0, "out": out,
           "cells_total": sum(len(job["cells"]) for job in jobs)}
    if options.cache_dir:
        ctx["cache"] = Cache(Path(options.cache_dir), options.cache_size)
        _look_up(jobs, checks, options, ctx["cache"], local_environment())

    def on_message(job, kind, payload):
        _dispatch(job, kind, payload, ctx, results, on_event)

    to_compute = [job for job in jobs if job["cells"]]
    for job in jobs:
        if not job["cells"]:
            on_message(job, "begin", None)
            on_message(job, "end", Finished(job["cached_digest"]))
    if to_compute:
        environment = run_jobs(to_compute, options, on_message, started=workers)
    else:
        for worker in workers or ():
            worker.close()
        environment = local_environment()
    environment = run_environment(environment, options)
    if ctx["cache"]:
        ctx["cache"].prune()
    ordered = tuple(results[job["entry"].name] for job in jobs)
    cached = sum(len(job.get("cached", {})) for job in jobs)
    return RunResult(entries=ordered, environment=environment, cached=cached,
                     computed=sum(len(job["cells"]) for job in jobs))


def run_environment(workers: dict, options: RunOptions) -> dict:
    """The workers' environment plus the run settings that change verdicts."""
    return {**workers, "examples": options.examples, "compile_backend": options.compile_backend}


def _look_up(jobs: list[dict], checks: dict, options: RunOptions, cache: Cache, environment: dict) -> None:
    """Move each job's cached cells out of ``cells`` into ``cached``; remember every cell's key."""
    audit = audit_digest()
    base = Path(options.base)
    for job in jobs:
        entry = job["entry"]
        code = code_fingerprint(entry, base, Path(options.checks_dir) if options.checks_dir else None)
        job["cache_keys"], job["cached"] = {}, {}
        if code is None:
            continue
        for key in job["cells"]:
            job["cache_keys"][key] = cell_key(entry, checks[key.check], key, job["claimed"][key], options,
                                              environment, code, audit)
            found = cache.get(job["cache_keys"][key])
            if found:
                job["cached"][key], job["cached_digest"] = found
        job["cells"] = [key for key in job["cells"] if key not in job["cached"]]


def _job(entry: Entry, checks: dict, options: RunOptions, only, devices) -> dict:
    keys = plan(entry, checks, only=only, devices=devices)
    return {"entry": entry, "cells": keys, "claimed": claims(entry, checks, keys), "options": options}


def _dispatch(job, kind, payload, ctx, results, on_event) -> None:
    entry = job["entry"]
    if kind == "begin":
        on_event(Event("entry_start", entry, done=ctx["done"], total=ctx["total"], cells_done=ctx["cells_done"],
                       cells_total=ctx["cells_total"]))
        for outcome in job.get("cached", {}).values():
            _dispatch(job, "outcome", outcome, ctx, results, on_event)
    elif kind == "outcome":
        cell = _judge(entry, job, payload, ctx)
        ctx.setdefault("judged", {}).setdefault(entry.name, []).append(cell)
        if outcome_is_new(job, payload):
            ctx.setdefault("fresh", {}).setdefault(entry.name, []).append(payload)
        ctx["cells_done"] += 1
        on_event(Event("cell", entry, cell=cell, done=ctx["done"], total=ctx["total"], cells_done=ctx["cells_done"],
                       cells_total=ctx["cells_total"]))
    elif kind == "end":
        ctx["done"] += 1
        if ctx["cache"] and not payload.target_error:
            for outcome in ctx.get("fresh", {}).get(entry.name, []):
                key = job["cache_keys"].get(outcome.key)
                if key:
                    ctx["cache"].put(key, outcome, payload.digest)
        cells = sorted(ctx.get("judged", {}).get(entry.name, []), key=_order(ctx["checks"]))
        result = EntryResult(entry, payload.digest, tuple(cells), payload.target_error)
        results[entry.name] = result
        on_event(Event("entry_end", entry, result=result, done=ctx["done"], total=ctx["total"]))


def outcome_is_new(job: dict, outcome) -> bool:
    """Whether ``outcome`` was computed in this run (not served from the cache)."""
    return job.get("cached", {}).get(outcome.key) is not outcome


def _judge(entry: Entry, job: dict, outcome, ctx) -> Cell:
    check = ctx["checks"][outcome.key.check]
    return judge(entry, outcome, claimed=job["claimed"][outcome.key], claim=check.claim, today=today(),
                 repro=repro_command(entry.name, outcome.key, ctx["seed"], ctx["registry"], ctx["backend"]),
                 replays=_replays(entry.name, outcome, ctx["out"]))


def _replays(name: str, outcome, out: str | None) -> tuple[str, ...]:
    """The command that runs each of the outcome's failures' replay scripts in ``out`` (none without one)."""
    if out is None or not outcome.others:
        return ()
    key = outcome.key
    return tuple(script_command(out, script_name(name, key.check, key.dtype, key.device, n))
                 for n in range(1, len(outcome.others) + 2))


def _order(checks: dict):
    names = list(checks)
    return lambda cell: (names.index(cell.check), DTYPE_ORDER.index(cell.dtype), DEVICE_ORDER.index(cell.device))


def repro_command(name: str, key, seed: int, registry: str, backend: str = "aot_eager") -> str:
    """The one command that replays a cell."""
    command = ["audit", "repro", name, key.check, "--dtype", key.dtype, "--device", key.device, "--seed", str(seed)]
    if key.check == "compile" and backend != "aot_eager":
        command += ["--compile-backend", backend]
    if Path(registry).name != "registry.yaml" or Path(registry).parent.resolve() != Path.cwd().resolve():
        command += ["--registry", registry]
    return shlex.join(command)


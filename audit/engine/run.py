"""The engine's entry point: plan every entry's cells, run them in workers, judge, stream progress."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from audit.cells import Cell, judge
from audit.contract import DEVICE_ORDER, DTYPE_ORDER
from audit.engine.options import RunOptions
from audit.engine.plan import claims, plan
from audit.engine.pool import run_jobs
from audit.registry.load import today
from audit.registry.model import Entry, Registry


@dataclass(frozen=True)
class EntryResult:
    """An audited entry: the digest of its target and its judged cells in matrix order."""

    entry: Entry
    digest: str | None
    cells: tuple[Cell, ...]
    target_error: str = ""


@dataclass(frozen=True)
class Event:
    """Progress, as the engine streams it: an entry began, a cell was judged, an entry ended."""

    kind: str
    entry: Entry
    cell: Cell | None = None
    result: EntryResult | None = None
    done: int = 0
    total: int = 0


@dataclass(frozen=True)
class RunResult:
    """Every audited entry, in registry order, and the workers' environment."""

    entries: tuple[EntryResult, ...]
    environment: dict


def run(registry: Registry, entries: list[Entry], checks: dict, options: RunOptions, *,
        only=None, devices=None, on_event=lambda event: None) -> RunResult:
    """Audit ``entries``; never prints. Cells are judged as they arrive and streamed to ``on_event``."""
    jobs = [_job(entry, checks, options, only, devices) for entry in entries]
    jobs = [job for job in jobs if job["cells"]]
    results: dict[str, EntryResult] = {}
    ctx = {"done": 0, "total": len(jobs), "registry": registry.path, "seed": options.seed, "checks": checks,
           "backend": options.compile_backend}

    def on_message(job, kind, payload):
        _dispatch(job, kind, payload, ctx, results, on_event)

    environment = run_jobs(jobs, options, on_message) if jobs else {}
    environment = {**environment, "examples": options.examples, "compile_backend": options.compile_backend}
    ordered = tuple(results[job["entry"].name] for job in jobs)
    return RunResult(entries=ordered, environment=environment)


def _job(entry: Entry, checks: dict, options: RunOptions, only, devices) -> dict:
    keys = plan(entry, checks, only=only, devices=devices)
    return {"entry": entry, "cells": keys, "claimed": claims(entry, checks, keys), "options": options}


def _dispatch(job, kind, payload, ctx, results, on_event) -> None:
    entry = job["entry"]
    if kind == "begin":
        on_event(Event("entry_start", entry, done=ctx["done"], total=ctx["total"]))
    elif kind == "outcome":
        cell = _judge(entry, job, payload, ctx)
        ctx.setdefault("judged", {}).setdefault(entry.name, []).append(cell)
        on_event(Event("cell", entry, cell=cell))
    elif kind == "end":
        ctx["done"] += 1
        cells = sorted(ctx.get("judged", {}).get(entry.name, []), key=_order(ctx["checks"]))
        result = EntryResult(entry, payload.digest, tuple(cells), payload.target_error)
        results[entry.name] = result
        on_event(Event("entry_end", entry, result=result, done=ctx["done"], total=ctx["total"]))


def _judge(entry: Entry, job: dict, outcome, ctx) -> Cell:
    check = ctx["checks"][outcome.key.check]
    return judge(entry, outcome, claimed=job["claimed"][outcome.key], claim=check.claim, today=today(),
                 repro=repro_command(entry.name, outcome.key, ctx["seed"], ctx["registry"], ctx["backend"]))


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


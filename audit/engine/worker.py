"""The worker process: imports torch once, then audits the entries the parent sends, cell by cell.

Run as ``python -m audit.engine.worker READ_FD WRITE_FD MAX_MEMORY [RESOURCE ...]``. A crash, hang or memory
blow-up here is the parent's to notice; the worker only reports what it starts and finishes. The worker that holds
a run's resources (see :mod:`audit.engine.parts`) is given their names and starts each (:mod:`audit.checking.resources`)
at start-up.
"""

from __future__ import annotations

import importlib
import os
import platform
import sys
import traceback
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.engine import memory
from audit.engine.job import Job
from audit.engine.messages import (Assign, CellFinished, CellStarted, ExampleDrawn, JobDone, Loaded, Ready, Retiring,
                                   StartUp)
from audit.engine.tampering import Watch
from audit.results.environment import Environment
from audit.results.kinds import ErrorKind
from audit.results.outcome import CellKey, Outcome, Verdict, error_outcome
from audit.runtime import collection, fingerprint, health
from audit.runtime.channel import connect, keep_tails
from audit.runtime.mutant import PROBE
from audit.runtime.reaper import become_subreaper, die_with_parent
from audit.runtime.startup import report_to

if TYPE_CHECKING:  # names only: the worker imports the checks and the target's loader when it needs them
    from audit.catalog.interface import Check
    from audit.inputs.case import Case
    from audit.runtime.target import Target


#: What the first cell would otherwise import: the audit's cell runner (Hypothesis) and what torch imports on
#: the first ``torch.autograd.grad`` call (sympy, through symbolic_shapes: over a second). Imported at start-up,
#: which has a generous budget of its own, not in the first cell, whose budget is ``--timeout``.
PRELOAD = ("audit.engine.cell", "torch.fx.experimental.symbolic_shapes")


def main(argv: list[str]) -> int:
    """Serve jobs until the parent says stop or closes the pipe."""
    inbox, outbox = connect(argv)
    die_with_parent()  # a run killed with SIGKILL takes its workers with it
    keep_tails()  # megabytes printed per call cost the worker nothing: only each write's end reaches the log
    become_subreaper()  # what a target starts in a session of its own still comes back to end with its cell
    import torch

    from audit.runtime import triton

    triton.at_start()  # before Dynamo (PRELOAD, a resource) imports triton
    torch.set_num_threads(1)
    for module in PRELOAD:
        importlib.import_module(module)
    if argv[3:]:
        from audit.checking import resources

        for name in argv[3:]:
            resources.start(name)  # before any target is loaded, and before the memory cap's watchdog thread
    memory.cap(int(argv[2]))
    collection.tune()  # after the imports: they are never garbage
    report_to(lambda what: outbox.send(StartUp(what)))
    health.own()
    bounds, served = health.Bounds(health.read(), int(argv[2])), 0
    start = fingerprint.take()  # torch as the audit left it: an entry that changes it is the last in this worker
    outbox.send(Ready(environment()))
    while True:
        try:
            message: Assign = inbox.recv()
        except EOFError:  # the parent closed the pipe: no more work
            return 0
        served += 1
        damaged = _job(message.job, outbox, bounds, start) or health.checkup(bounds, served, message.job.entry.name)
        if damaged:
            _retire(damaged, inbox, outbox)
        outbox.send(JobDone())


def environment() -> Environment:
    """The facts about this process's torch that the matrix records."""
    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        devices.append("mps")
    # Plain strings: torch.__version__ is a TorchVersion, and unpickling one would import torch in the parent,
    # serially, while the workers wait (2-3 s of every run).
    cuda = torch.version.cuda
    return Environment(torch=str(torch.__version__), python=platform.python_version(), cuda=cuda and str(cuda),
                       devices=tuple(devices), platform=platform.platform())


def _job(job: Job, outbox: Connection, bounds: health.Bounds, start: fingerprint.Fingerprint) -> str:
    """Audit one entry's cells; returns why this worker must retire, when a cell may have damaged it or the entry
    changed torch itself since ``start`` ("" when neither: :mod:`audit.runtime.health`,
    :mod:`audit.runtime.fingerprint`). Global torch state the entry's import leaves (a module that sets its
    default dtype) stays for its cells, as its users see it, and is undone after the entry; :func:`run_cell`
    undoes what each cell changes."""
    from audit.runtime.isolation import isolated
    from audit.runtime.reaper import end_strays

    checks = _checks(job.options.checks_dir)
    with isolated():
        target = _load(job, outbox)
        watch = Watch(start, job.entry.target.partition(":")[0])
        watch.look(operators=True)
        if target is None:  # every cell is an error already
            return watch.reason()
        with _mutated(job, outbox) as swap:
            if swap is False:  # the mutant could not be loaded: every cell is an error already
                return watch.reason()
            for key in job.cells:
                outbox.send(CellStarted(key))
                outcome = (_probe(target, swap, key, job) if swap and key.check == PROBE
                           else _cell(target, checks[key.check], key, job, outbox))
                end_strays()  # what the cell started ends with it
                damaged = health.taken()
                if not damaged and outcome.kind == ErrorKind.AUDIT_FAILED:
                    damaged = health.checkup(bounds, 0)  # an error not classified: look now
                watch.look()
                outbox.send(CellFinished(watch.mark(outcome)))
                if damaged:
                    return damaged
                if swap and _decided(key, outcome):
                    break
    return watch.reason()


@contextmanager
def _mutated(job: Job, outbox: Connection) -> Iterator[Any]:
    """Inside, the job's mutant runs in place of its function (None: the job has no mutant; False: it could not be
    loaded, and each cell has said so)."""
    from audit.runtime.mutant import MutantError, applied

    if job.mutant is None:
        yield None
        return
    with ExitStack() as stack:
        try:
            swap = stack.enter_context(applied(job.mutant))
        except MutantError as exc:
            for key in job.cells:
                outbox.send(CellFinished(error_outcome(key, f"the mutant could not be loaded: {exc}",
                                                       ErrorKind.NOT_LOADED)))
            swap = False
        yield swap


def _decided(key: CellKey, outcome: Outcome) -> bool:
    """Whether a mutant's job ends after this cell: the probe found it changes nothing, or a check failed or
    erred on it (the first killing cell is enough)."""
    if key.check == PROBE:
        return outcome.verdict != Verdict.HELD
    return outcome.verdict in (Verdict.VIOLATED, Verdict.ERRORED)


def _probe(target: Target, swap: Any, key: CellKey, job: Job) -> Outcome:
    from audit.engine.equivalence import probe
    from audit.runtime.options import cell_seed

    return probe(job.entry, target, swap, key, job.options,
                 cell_seed(job.options.seed, job.entry.registered_name, key.check, key.dtype, key.device))


def _retire(reason: str, inbox: Connection, outbox: Connection) -> None:
    """Say why this worker serves nothing more, then wait to be ended: the parent ends it with everything it
    started (an exit of its own would orphan them)."""
    outbox.send(Retiring(reason))
    while True:
        try:
            inbox.recv()
        except (EOFError, OSError):
            os._exit(0)


def _load(job: Job, outbox: Connection) -> Target | None:
    """The entry's target, announced to the parent; None, and every cell an error, when it cannot be loaded."""
    from audit.runtime.target import TargetError, resolve

    try:
        target = resolve(job.entry, Path(job.options.base))
    except (TargetError, SyntaxError) as exc:
        outbox.send(Loaded(None, str(exc)))
        for key in job.cells:
            outbox.send(CellFinished(error_outcome(key, f"target could not be loaded: {exc}", ErrorKind.NOT_LOADED)))
        return None
    outbox.send(Loaded(target.digest))
    return target


def _cell(target: Target, check: Check, key: CellKey, job: Job, outbox: Connection) -> Outcome:
    """One cell's outcome; an error outcome when the audit itself fails on it."""
    from audit.engine.cell import run_cell

    options = job.options

    def on_example(case: Case) -> None:
        outbox.send(ExampleDrawn(case.describe()))

    try:
        return run_cell(job.entry, target, check, key, options, job.claimed[key], on_example)
    except MemoryError as exc:
        health.note(health.damage(exc))
        return error_outcome(key, f"out of memory: over the worker's cap of {options.max_memory >> 20} MiB "
                                  f"(raise it with --max-memory): {exc}", ErrorKind.OUT_OF_MEMORY)
    except Exception as exc:
        health.note(health.damage(exc))
        return error_outcome(key, f"{AUDIT_FAILED}{type(exc).__name__}: {exc}\n{traceback.format_exc()}",
                             ErrorKind.AUDIT_FAILED)


#: How an error the audit could not classify begins: after one, the worker's health is checked at once.
AUDIT_FAILED = "the audit failed: "


_TABLES: dict[str | None, dict[str, Check]] = {}


def _checks(folder: str | None) -> dict[str, Check]:
    from audit.checks import table

    if folder not in _TABLES:
        _TABLES[folder] = table(Path(folder) if folder else None)
    return _TABLES[folder]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

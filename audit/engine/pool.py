"""Worker processes, scheduled over entries: crashes, hangs and memory blow-ups become error cells."""

from __future__ import annotations

import math
import os
import signal
import tempfile
import time
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from multiprocessing.connection import wait

from audit.engine import prebuild
from audit.engine.job import Finished, Job, Listener
from audit.engine.memory import EXIT_OUT_OF_MEMORY
from audit.engine.messages import (Assign, CellFinished, CellStarted, ExampleDrawn, FromWorker, JobDone, Loaded,
                                   Ready, Retiring, StartUp)
from audit.engine.parts import Part, Wholes, split, take
from audit.engine.timeline import stamp
from audit.results.environment import Environment
from audit.results.kinds import ErrorKind
from audit.results.outcome import CellKey, Outcome, error_outcome
from audit.runtime import jit, scratch
from audit.runtime.channel import spawn, tail
from audit.runtime.options import RunOptions
from audit.runtime.reaper import end_group
from audit.runtime.triton import WANTED as TRITON_WANTED

LOADING = "loading the target"
#: The thread pools of the numerical libraries a target may use (OpenMP, MKL, OpenBLAS, numba), one thread each in
#: a worker unless the user set them: with several workers, pools sized to the machine oversubscribe its cores (a
#: numba-parallel soft-DTW's unclaimed gradgradcheck took 28 s at -j 2 beside other workers, 0.8 s alone: its
#: 30 s budget then decides), and a parallel reduction's rounding would depend on the machine's core count.
THREAD_POOLS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMBA_NUM_THREADS")
#: Workers an entry may lose before its cells still to run become errors, counted apart for the cells of pinned
#: checks (those with a resource) and the rest: with several workers the two run as separate parts, each counting
#: its own losses, and with one worker the same count gives the same cells the same verdicts.
MAX_RESTARTS = 3


class Worker:
    """One worker process and the two pipes to it; its stdout and stderr go to a temporary log."""

    def __init__(self, options: RunOptions, resources: tuple[str, ...] = (), slot: int = 0) -> None:
        """``resources``: the per-worker resources the worker starts at start-up, by name (the holder of the cells of
        the checks that need them, see :mod:`audit.engine.parts`). ``slot``: its index among the workers running at
        once, which names its JIT cache folders (:mod:`audit.runtime.jit`; a replacement takes the same)."""
        self.log = tempfile.TemporaryFile()  # noqa: SIM115  (the worker's log, for as long as it lives: close())
        self.resources, self.slot = resources, slot
        args = [str(options.max_memory), *resources]
        child = spawn("audit.engine.worker", args, env=_worker_env(options, slot), log=self.log)
        self.process, self.outbox, self.inbox = child.process, child.outbox, child.inbox
        self.max_memory = options.max_memory
        stamp("spawn", slot)

    def death(self) -> str:
        """How the process ended, and the last lines it wrote to stdout and stderr."""
        code = self.process.wait()
        if code == EXIT_OUT_OF_MEMORY:
            return (f"out of memory: over the worker's cap of {self.max_memory >> 20} MiB (resident memory; "
                    "raise it with --max-memory)")
        cause = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        last = tail(self.log, 5)
        return cause + (f"; its last output: {' | '.join(last)}" if last else "")

    def close(self) -> None:
        """Kill the process, and every process it started, and release its pipes."""
        end_group(self.process)
        for end in (self.inbox, self.outbox):
            end.close()
        self.log.close()


def _worker_env(options: RunOptions, slot: int = 0) -> dict[str, str]:
    env = scratch.worker_env(dict(os.environ))  # what a worker writes goes under the run's root
    env = jit.slot_env(env, jit.root(options.base, options.cache_dir), slot)  # and what it compiles, in its slot's
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    for threads in THREAD_POOLS:  # one thread each, as torch's own (worker.main): see THREAD_POOLS
        env.setdefault(threads, "1")
    if options.triton_interpret:
        env[TRITON_WANTED] = "interpret"
    return env


@dataclass
class Assignment:
    """An entry being audited by a worker: what is left, and what is running now."""

    job: Job
    remaining: list[CellKey]
    outcomes: list[Outcome] = field(default_factory=list)
    digest: str | None = None
    target_error: str = ""
    current: CellKey | str | None = LOADING  #: a cell's key, LOADING, or None between cells
    budget: float = 0.0
    deadline: float = math.inf
    example: str = ""
    pinned: frozenset[str] = frozenset()  #: the pinned checks, whose cells count their lost workers apart
    restarts: dict[bool, int] = field(default_factory=dict)  #: lost workers, by whether a pinned cell lost them
    starting: str = ""
    paused: tuple[float, ...] = ()  #: (the cell's budget, the seconds it had left) while start-up work runs

    def expect(self, current: CellKey | str | None, budget: float) -> None:
        """From now on ``current`` runs (a cell's key; LOADING; None between cells), for at most ``budget`` s."""
        self.current, self.budget, self.deadline, self.example = current, budget, time.monotonic() + budget, ""
        self.starting, self.paused = "", ()

    def start_up(self, what: str, budget: float) -> None:
        """The running cell does start-up work (``what``) for at most ``budget`` s, its own clock stopped;
        an empty ``what``: the work is done and the cell's clock goes on."""
        now = time.monotonic()
        if what and not self.paused:
            self.paused = (self.budget, self.deadline - now)
            self.budget, self.deadline = budget, now + budget
        elif not what and self.paused:
            self.budget, self.deadline = self.paused[0], now + self.paused[1]
            self.paused = ()
        self.starting = what


#: A worker and what it audits now (None: nothing).
Slot = tuple[Worker, Assignment | None]


def prestart(options: RunOptions, count: int, resources: tuple[str, ...] = ()) -> list[Worker]:
    """Start ``count`` workers now, so that their torch import overlaps the parent's planning; the first (the one
    that will hold the cells of the checks that need them) starts the per-worker ``resources``."""
    return [Worker(options, resources=() if index else resources, slot=index) for index in range(max(0, count))]


def run_jobs(jobs: list[Job], options: RunOptions, listener: Listener, started: list[Worker] | None = None,
             pinned: frozenset[str] = frozenset(), resources: tuple[str, ...] = ()) -> Environment:
    """Audit every job; ``listener`` hears each start, outcome and end of every whole job. ``started`` workers
    (from :func:`prestart`) are used first; any not needed are closed. The cells of the ``pinned`` checks all
    run in one worker, the holder, which starts the per-worker ``resources`` they need (see
    :mod:`audit.engine.parts`).

    Returns the environment the workers reported (each the same: one machine, one torch). Whatever the workers
    write goes under the run's temporary root (:mod:`audit.runtime.scratch`), removed when the jobs are done.
    """
    with scratch.run_root():
        return _run_jobs(jobs, options, listener, started, pinned, resources)


def _run_jobs(jobs: list[Job], options: RunOptions, listener: Listener, started: list[Worker] | None,
              pinned: frozenset[str], resources: tuple[str, ...]) -> Environment:
    slots: list[Slot] = []
    reported: list[Environment] = []
    wanted = max(1, min(options.jobs, len(jobs)))
    # One worker (the first slot, the holder) runs every cell of a check with a resource; with one worker, nothing
    # is split and each entry's cells run together, in order.
    parts = split(jobs, pinned if wanted > 1 else frozenset())
    pending, listener = deque(parts), Wholes(jobs, parts, listener)
    started = list(started or ())
    for extra in started[wanted:]:
        extra.close()
    builders = prebuild.Builders(jobs, options.base, _worker_env(options))  # native sources: built beside the workers
    try:
        slots = [(w, None) for w in started[:wanted]]
        used = resources if any(key.check in pinned for job in jobs for key in job.cells) else ()
        slots += [(Worker(options, resources=() if index else used, slot=index), None)
                  for index in range(len(slots), wanted)]
        while pending or any(a for _, a in slots):
            slots = [_assign(w, a, pending, listener, options, pinned, holder=not index, later=builders.building)
                     for index, (w, a) in enumerate(slots)]
            ready = wait([w.inbox for w, a in slots if a], timeout=_next_deadline(slots))
            slots = [_serve(w, a, ready, options, listener, reported) for w, a in slots]
    finally:
        for worker, _ in slots:
            worker.close()
        builders.close()
        stamp("workers_done")
    return reported[-1] if reported else Environment()


def _assign(worker: Worker, assignment: Assignment | None, pending: deque[Part], listener: Listener,
            options: RunOptions, pinned: frozenset[str], holder: bool, later: Callable[[Job], bool]) -> Slot:
    if assignment is not None:
        return worker, assignment
    part = take(pending, holder, later)
    if part is None:
        return worker, None
    job = part.job
    listener.begin(job)
    worker.outbox.send(Assign(job))
    stamp("assign", worker.slot, job.entry.name)
    assignment = Assignment(job=job, remaining=list(job.cells), pinned=pinned)
    assignment.expect(LOADING, options.startup_budget)
    return worker, assignment


def _next_deadline(slots: list[Slot]) -> float:
    now = time.monotonic()
    return max(0.0, min((a.deadline - now for _, a in slots if a), default=1.0))


def _serve(worker: Worker, assignment: Assignment | None, ready: Collection[object], options: RunOptions,
           listener: Listener, reported: list[Environment]) -> Slot:
    if assignment is None:
        return worker, None
    if worker.inbox in ready:
        try:
            while worker.inbox.poll():
                message: FromWorker = worker.inbox.recv()
                if isinstance(message, Retiring):
                    return _retire(worker, assignment, message.reason, options, listener)
                going_on = _receive(assignment, message, options, listener, reported, worker.slot)
                if going_on is None:
                    return worker, None
                assignment = going_on
        except (EOFError, OSError):
            return _replace(worker, assignment, f"the worker process {worker.death()}", options, listener,
                            kind=ErrorKind.WORKER_DIED)
    if time.monotonic() > assignment.deadline:
        end_group(worker.process)
        worker.death()
        return _replace(worker, assignment, f"timed out after {assignment.budget:g} s", options, listener,
                        kind=ErrorKind.TIMED_OUT, note=_budget_note(assignment, options))
    return worker, assignment


def _budget_note(assignment: Assignment, options: RunOptions) -> str:
    """Which budget ran out, when it is not ``--timeout`` for a claimed check."""
    if assignment.starting:
        return (f"; this is the start-up budget for {assignment.starting} (the longer of "
                f"{options.startup_timeout:g} s and --timeout), not the check's")
    if not isinstance(assignment.current, CellKey):  # LOADING, or between cells
        return (f"; this is the start-up budget (the worker importing torch, then the target: the longer of "
                f"{options.startup_timeout:g} s and --timeout); --timeout counts from the start of each check")
    if not assignment.job.claimed[assignment.current]:
        return ("; this is an unclaimed probe's budget (--unclaimed-timeout, at most --timeout): an unclaimed "
                "cell never fails the gate, so it is not waited for as long as a claimed one")
    return ""


def _receive(assignment: Assignment, message: FromWorker, options: RunOptions, listener: Listener,
             reported: list[Environment], slot: int = 0) -> Assignment | None:
    _stamped(message, slot, assignment.job.entry.name)
    match message:
        case Ready(found):
            reported.append(found)
        case Loaded(digest, error):
            assignment.digest, assignment.target_error = digest, error
        case CellStarted(key):
            assignment.expect(key, options.cell_budget(assignment.job.claimed[key]))
        case ExampleDrawn(case):
            assignment.example = case
        case StartUp(what):
            assignment.start_up(what, options.startup_budget)
        case CellFinished(outcome):
            _record(assignment, outcome, listener)
            assignment.expect(None, options.startup_budget)  # until the next cell starts: the worker's own time
        case JobDone():
            _end(assignment, listener)
            return None
    return assignment


def _stamped(message: FromWorker, slot: int, name: str) -> None:
    """The message's phase on the run's timeline (:mod:`audit.engine.timeline`)."""
    match message:
        case Ready():
            stamp("ready", slot)
        case Loaded():
            stamp("loaded", slot, name)
        case CellStarted(key):
            stamp("cell", slot, f"{name} {key.check} {key.dtype} {key.device}")
        case CellFinished(outcome):
            stamp("cell_end", slot, f"{name} {outcome.key.check}")
        case StartUp(what):
            stamp("startup" if what else "startup_end", slot, what)
        case JobDone():
            stamp("job_end", slot, name)


def _end(assignment: Assignment, listener: Listener) -> None:
    listener.end(assignment.job, Finished(assignment.digest, assignment.target_error))


def _record(assignment: Assignment, outcome: Outcome, listener: Listener) -> None:
    assignment.outcomes.append(outcome)
    if outcome.key in assignment.remaining:
        assignment.remaining.remove(outcome.key)
    assignment.current = None
    listener.outcome(assignment.job, outcome)


def _retire(worker: Worker, assignment: Assignment, reason: str, options: RunOptions, listener: Listener) -> Slot:
    """The worker may be damaged (``reason``; see :mod:`audit.runtime.health`): end it, blaming nothing (its last
    cell has its outcome), and give what is left of the entry to a fresh worker."""
    worker.close()
    _count_loss(assignment, listener, "was retired as damaged")
    return _go_on(Worker(options, resources=worker.resources, slot=worker.slot), assignment, options, listener)


def _replace(worker: Worker, assignment: Assignment, cause: str, options: RunOptions, listener: Listener,
             *, kind: ErrorKind, note: str = "") -> Slot:
    """The worker died or hung: blame the running cell, start a new worker, go on with the rest."""
    worker.close()
    current = assignment.current
    if not isinstance(current, CellKey):  # LOADING, or between cells
        for key in list(assignment.remaining):
            _record(assignment, error_outcome(key, f"{cause} while {LOADING}{note}", kind), listener)
    else:
        where = f" on example {assignment.example}" if assignment.example else ""
        message = f"{cause} during {current.check} ({current.dtype}, {current.device}){where}{note}"
        _record(assignment, error_outcome(current, message, kind), listener)
    _count_loss(assignment, listener, "died or hung")
    return _go_on(Worker(options, resources=worker.resources, slot=worker.slot), assignment, options, listener)


def _count_loss(assignment: Assignment, listener: Listener, how: str) -> None:
    """One more worker lost on this entry, by a pinned check's cell or another (the last cell recorded: the one the
    worker died or hung in, or the one after which it retired); after :data:`MAX_RESTARTS` of one kind, its cells of
    that kind still to run are errors rather than a fresh worker each (a target that damages every cell would
    otherwise cost a worker start-up per cell)."""
    pinned = bool(assignment.outcomes) and assignment.outcomes[-1].key.check in assignment.pinned
    assignment.restarts[pinned] = assignment.restarts.get(pinned, 0) + 1
    if assignment.restarts[pinned] >= MAX_RESTARTS:
        for key in [key for key in assignment.remaining if (key.check in assignment.pinned) == pinned]:
            message = (f"not run: this entry lost its worker {MAX_RESTARTS} times (it died, hung or was retired as "
                       f"damaged; the last time it {how})")
            _record(assignment, error_outcome(key, message, ErrorKind.NOT_RUN), listener)


def _go_on(fresh: Worker, assignment: Assignment, options: RunOptions, listener: Listener) -> Slot:
    """``fresh`` takes the cells of ``assignment`` still to run; the entry ends when none are."""
    if not assignment.remaining:
        _end(assignment, listener)
        return fresh, None
    fresh.outbox.send(Assign(assignment.job.only(assignment.remaining)))
    assignment.expect(LOADING, options.startup_budget)
    return fresh, assignment

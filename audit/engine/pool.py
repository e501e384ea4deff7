"""Worker processes, scheduled over entries: crashes, hangs and memory blow-ups become error cells."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait

from audit.engine.cell import error_outcome
from audit.engine.options import RunOptions

LOADING = "loading the target"
MAX_RESTARTS = 3


class Worker:
    """One worker process and the two pipes to it; its stderr goes to a temporary log."""

    def __init__(self, options: RunOptions):
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        self.log = tempfile.TemporaryFile()
        command = [sys.executable, "-m", "audit.engine.worker", str(to_child_r), str(from_child_w),
                   str(options.max_memory)]
        self.process = subprocess.Popen(command, pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL,
                                        stdout=self.log, stderr=self.log, env=_worker_env(options))
        os.close(to_child_r)
        os.close(from_child_w)
        self.outbox = Connection(to_child_w, readable=False)
        self.inbox = Connection(from_child_r, writable=False)
        self.environment: dict | None = None

    def death(self) -> str:
        """How the process ended, and the last lines it wrote to stderr."""
        code = self.process.wait()
        cause = f"was killed by {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace").strip().splitlines()[-5:]
        return cause + (f"; its last output: {' | '.join(tail)}" if tail else "")

    def close(self) -> None:
        """Kill the process and release its pipes."""
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for end in (self.inbox, self.outbox):
            end.close()
        self.log.close()


def _worker_env(options: RunOptions) -> dict:
    env = dict(os.environ)
    package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    env.setdefault("OMP_NUM_THREADS", "1")
    return env


@dataclass
class Assignment:
    """An entry being audited by a worker: what is left, and what is running now."""

    job: dict
    remaining: list
    outcomes: list = field(default_factory=list)
    digest: str | None = None
    target_error: str = ""
    current: object = LOADING
    started: float = field(default_factory=time.monotonic)
    example: str = ""
    restarts: int = 0


def prestart(options: RunOptions, count: int) -> list[Worker]:
    """Start ``count`` workers now, so that their torch import overlaps the parent's planning."""
    return [Worker(options) for _ in range(max(0, count))]


def run_jobs(jobs: list[dict], options: RunOptions, on_message, started: list[Worker] | None = None) -> dict:
    """Audit every job; ``on_message(job, kind, payload)`` hears each start and outcome. ``started``
    workers (from :func:`prestart`) are used first; any not needed are closed.

    Returns the environment the workers reported.
    """
    pending = deque(jobs)
    slots: list[tuple[Worker, Assignment | None]] = []
    environment: dict = {}
    wanted = max(1, min(options.jobs, len(jobs)))
    started = list(started or ())
    for extra in started[wanted:]:
        extra.close()
    try:
        slots = [(w, None) for w in started[:wanted]]
        slots += [(Worker(options), None) for _ in range(wanted - len(slots))]
        while pending or any(a for _, a in slots):
            slots = [_assign(w, a, pending, on_message) for w, a in slots]
            ready = wait([w.inbox for w, a in slots if a], timeout=_next_deadline(slots, options))
            slots = [_serve(w, a, ready, options, on_message, environment) for w, a in slots]
    finally:
        for worker, _ in slots:
            worker.close()
    return environment


def _assign(worker: Worker, assignment, pending: deque, on_message):
    if assignment is not None or not pending:
        return worker, assignment
    job = pending.popleft()
    on_message(job, "begin", None)
    worker.outbox.send(("job", job))
    return worker, Assignment(job=job, remaining=list(job["cells"]))


def _next_deadline(slots, options: RunOptions) -> float:
    now = time.monotonic()
    deadlines = [a.started + options.timeout - now for _, a in slots if a]
    return max(0.0, min(deadlines, default=1.0))


def _serve(worker: Worker, assignment, ready, options: RunOptions, on_message, environment: dict):
    if assignment is None:
        return worker, None
    if worker.inbox in ready:
        try:
            while worker.inbox.poll():
                assignment = _receive(worker, assignment, worker.inbox.recv(), on_message, environment)
                if assignment is None:
                    return worker, None
        except (EOFError, OSError):
            return _replace(worker, assignment, f"the worker process {worker.death()}", options, on_message)
    if time.monotonic() - assignment.started > options.timeout:
        worker.process.kill()
        worker.death()
        return _replace(worker, assignment, f"timed out after {options.timeout:g} s", options, on_message)
    return worker, assignment


def _receive(worker: Worker, assignment: Assignment, message, on_message, environment: dict):
    kind = message[0]
    if kind == "ready":
        environment.update(message[1])
    elif kind == "target":
        assignment.digest, assignment.target_error = message[1], message[2]
        assignment.current, assignment.started = None, time.monotonic()
    elif kind == "start":
        assignment.current, assignment.started, assignment.example = message[1], time.monotonic(), ""
    elif kind == "example":
        assignment.example = message[1]
    elif kind == "outcome":
        _record(assignment, message[1], on_message)
    elif kind == "done":
        on_message(assignment.job, "end", assignment)
        return None
    return assignment


def _record(assignment: Assignment, outcome, on_message) -> None:
    assignment.outcomes.append(outcome)
    if outcome.key in assignment.remaining:
        assignment.remaining.remove(outcome.key)
    assignment.current = None
    on_message(assignment.job, "outcome", outcome)


def _replace(worker: Worker, assignment: Assignment, cause: str, options: RunOptions, on_message):
    """The worker died or hung: blame the running cell, start a new worker, go on with the rest."""
    worker.close()
    current = assignment.current
    if current == LOADING or current is None:
        for key in list(assignment.remaining):
            _record(assignment, error_outcome(key, f"{cause} while {LOADING}"), on_message)
    else:
        where = f" on example {assignment.example}" if assignment.example else ""
        message = f"{cause} during {current.check} ({current.dtype}, {current.device}){where}"
        _record(assignment, error_outcome(current, message), on_message)
    assignment.restarts += 1
    if assignment.restarts >= MAX_RESTARTS:
        for key in list(assignment.remaining):
            _record(assignment, error_outcome(key, f"not run: the worker died {MAX_RESTARTS} times on this entry"),
                    on_message)
    fresh = Worker(options)
    if not assignment.remaining:
        on_message(assignment.job, "end", assignment)
        return fresh, None
    job = {**assignment.job, "cells": list(assignment.remaining)}
    fresh.outbox.send(("job", job))
    assignment.current, assignment.started, assignment.example = LOADING, time.monotonic(), ""
    return fresh, assignment

"""What the engine and a worker process say over their pipes: one type per message, dispatched by type.

The parent sends :class:`Assign` (and closes the pipe to end the worker); the worker answers :class:`Ready` once,
then for each job :class:`Loaded`, and per cell :class:`CellStarted`, any :class:`ExampleDrawn` and :class:`StartUp`,
then :class:`CellFinished`; :class:`JobDone` ends the job. :class:`Retiring`, after a cell or before
:class:`JobDone`, says the worker serves nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass

from audit.engine.job import Job
from audit.results.environment import Environment
from audit.results.outcome import CellKey, Outcome


@dataclass(frozen=True)
class Assign:
    """Parent to worker: audit this job."""

    job: Job


@dataclass(frozen=True)
class Ready:
    """Worker to parent, once: torch is imported; the facts about it that the matrix records."""

    environment: Environment


@dataclass(frozen=True)
class Loaded:
    """The job's target loaded, with its digest; or it could not be (``digest`` None, ``error`` says why)."""

    digest: str | None
    error: str = ""


@dataclass(frozen=True)
class CellStarted:
    """A cell starts: its budget (``--timeout``, or the unclaimed one) starts counting."""

    key: CellKey


@dataclass(frozen=True)
class ExampleDrawn:
    """The running cell tries this example (described, for a timeout's message)."""

    case: str


@dataclass(frozen=True)
class StartUp:
    """The running cell does start-up work (``what``) on the start-up budget; an empty ``what``: done."""

    what: str


@dataclass(frozen=True)
class CellFinished:
    """A cell's outcome (the worker goes on with the next cell, its own time until it starts)."""

    outcome: Outcome


@dataclass(frozen=True)
class Retiring:
    """The worker may be damaged (``reason``, see :mod:`audit.runtime.health`) and serves no further cell: the
    parent ends it and gives what is left of its job to a fresh one."""

    reason: str


@dataclass(frozen=True)
class JobDone:
    """Every cell of the job has its outcome."""


#: Everything a worker sends its parent.
FromWorker = Ready | Loaded | CellStarted | ExampleDrawn | StartUp | CellFinished | JobDone | Retiring

"""What the engine hands a worker for one entry (a :class:`Job`), how the entry ended (:class:`Finished`), and what
hears the jobs run (a :class:`Listener`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from audit.registry.model import Entry
from audit.results.outcome import CellKey, Outcome
from audit.runtime.mutant import Mutant
from audit.runtime.options import RunOptions


@dataclass(frozen=True)
class Job:
    """One entry to audit in a worker: its cells still to run, in order, whether each is claimed, the run's
    options, and for ``audit mutate`` the mutant loaded in place of one of the target's functions. It is pickled
    to the worker over a pipe: plain data only, nothing the worker does not need."""

    entry: Entry
    cells: tuple[CellKey, ...]
    claimed: dict[CellKey, bool]
    options: RunOptions
    #: ``audit mutate``: the one function changed while the cells run; its job's first cell is the
    #: equivalence probe (:mod:`audit.engine.equivalence`), and the job stops at its first cell that fails
    mutant: Mutant | None = None

    def only(self, cells: Iterable[CellKey]) -> Job:
        """The same job, for ``cells`` only (what a replacement worker, or the result cache, left to run)."""
        return replace(self, cells=tuple(cells))


@dataclass(frozen=True)
class Finished:
    """How an entry's target loaded: its digest, or why it could not be loaded."""

    digest: str | None
    target_error: str = ""


class Listener(Protocol):
    """What hears the pool: each job's start, each of its outcomes as it arrives, and its end."""

    def begin(self, job: Job) -> None:
        """A worker takes ``job``."""

    def outcome(self, job: Job, outcome: Outcome) -> None:
        """A cell of ``job`` has its outcome (an error outcome when its worker died or hung)."""

    def end(self, job: Job, finished: Finished) -> None:
        """Every cell of ``job`` has its outcome."""

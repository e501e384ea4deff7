"""What the engine hands a worker for one entry (a :class:`Job`), and how the entry ended (:class:`Finished`)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from audit.registry.model import Entry
from audit.results.outcome import CellKey
from audit.runtime.options import RunOptions


@dataclass(frozen=True)
class Job:
    """One entry to audit in a worker: its cells still to run, in order, whether each is claimed, and the run's
    options. It is pickled to the worker over a pipe: plain data only, nothing the worker does not need."""

    entry: Entry
    cells: tuple[CellKey, ...]
    claimed: dict[CellKey, bool]
    options: RunOptions

    def only(self, cells) -> Job:
        """The same job, for ``cells`` only (what a replacement worker, or the result cache, left to run)."""
        return replace(self, cells=tuple(cells))


@dataclass(frozen=True)
class Finished:
    """How an entry's target loaded: its digest, or why it could not be loaded."""

    digest: str | None
    target_error: str = ""

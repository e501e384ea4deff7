"""An entry's job in parts, so that several workers share a run without each starting the same helper.

A check that needs a per-worker resource (``Check.resource``, such as the distributed check's pair of rank
processes, which costs two torch imports to start) has its cells sent to one worker, the holder, which starts it;
the entry's other cells form a part any worker takes. The listener still hears of whole jobs: one begin, every
outcome, one end per entry.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from audit.engine.job import Finished, Job, Listener
from audit.results.outcome import Outcome


@dataclass(frozen=True)
class Part:
    """Some of a job's cells; ``pinned``: only the holding worker takes it."""

    job: Job
    pinned: bool = False


def split(jobs: list[Job], pinned_checks: frozenset[str]) -> list[Part]:
    """Each job as its unpinned part, then its pinned part (the cells of ``pinned_checks``), in job order; a
    part with no cell is left out."""
    parts: list[Part] = []
    for job in jobs:
        own = tuple(key for key in job.cells if key.check in pinned_checks)
        rest = tuple(key for key in job.cells if key.check not in pinned_checks)
        parts += [Part(job.only(cells), pinned) for cells, pinned in ((rest, False), (own, True)) if cells]
    return parts


def take(pending: deque[Part], holder: bool, later: Callable[[Job], bool] = lambda job: False) -> Part | None:
    """The next part a worker may take: the first one for the holder, the first unpinned one for any other; one
    whose job is to wait (``later``: its native build still running) only when no other is left to take."""
    allowed = [index for index, part in enumerate(pending) if holder or not part.pinned]
    index = next((i for i in allowed if not later(pending[i].job)), allowed[0] if allowed else None)
    if index is None:
        return None
    part = pending[index]
    del pending[index]
    return part


class Wholes:
    """Hears the parts and tells ``listener`` of the whole jobs they came from: begin when the first part is
    taken, each outcome, end after the last part ends (with the digest and target error either part saw)."""

    def __init__(self, jobs: list[Job], parts: list[Part], listener: Listener) -> None:
        self.listener = listener
        self.wholes = {job.entry.name: job for job in jobs}
        self.left = dict.fromkeys(self.wholes, 0)
        for part in parts:
            self.left[part.job.entry.name] += 1
        self.finished: dict[str, Finished] = {}

    def begin(self, job: Job) -> None:
        """A part is taken: the whole job begins with the first."""
        name = job.entry.name
        if name not in self.finished:
            self.finished[name] = Finished(None)
            self.listener.begin(self.wholes[name])

    def outcome(self, job: Job, outcome: Outcome) -> None:
        """A cell of a part has its outcome: it is the whole job's."""
        self.listener.outcome(self.wholes[job.entry.name], outcome)

    def end(self, job: Job, finished: Finished) -> None:
        """A part ended; the whole job ends with its last."""
        name = job.entry.name
        seen = self.finished[name]
        self.finished[name] = Finished(seen.digest or finished.digest, seen.target_error or finished.target_error)
        self.left[name] -= 1
        if not self.left[name]:
            self.listener.end(self.wholes[name], self.finished[name])

"""What ``audit mutate`` found, as frozen data: each mutant's fate, each entry's counts and kill rate, and the
whole run's; :func:`to_json` writes the documented ``mutation.json``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

#: A mutant's fate. ``killed``: a claimed cell failed on it; ``survived``: every claimed cell held; ``equivalent``:
#: it changes no output, gradient or tangent anywhere the probe looked (or never ran); ``errored``: it could not be
#: loaded, or a cell erred (a crash, a hang) before any failed.
KILLED, SURVIVED, EQUIVALENT, ERRORED = "killed", "survived", "equivalent", "errored"
FATES = (KILLED, SURVIVED, EQUIVALENT, ERRORED)
#: The JSON's version (``mutation.json``'s ``schema``).
SCHEMA = 1


def kill_rate(counts: dict[str, int]) -> float | None:
    """killed / (killed + survived): the share of the mutants that change a result which the claimed checks catch
    (equivalent and errored mutants are not counted); None with none to count."""
    judged = counts[KILLED] + counts[SURVIVED]
    return counts[KILLED] / judged if judged else None


@dataclass(frozen=True)
class MutantResult:
    """One mutant: what it changed (function, operator, the one-line diff), its fate, the cell that decided it (the
    first killing cell: ``check``, ``dtype``, ``device``), what the probe found, the claimed cells it passed, and
    for a survivor the suggestion derived from where it differs."""

    number: int
    function: str
    operator: str
    diff: str
    fate: str
    reason: str = ""
    killed_by: str = ""
    passed: tuple[str, ...] = ()
    differs: dict[str, Any] = field(default_factory=dict)
    suggestion: str = ""
    cached: bool = False


@dataclass(frozen=True)
class EntryMutation:
    """One entry's mutants, and why some of its functions or cells were left out (``notes``)."""

    name: str
    owners: tuple[str, ...]
    mutants: tuple[MutantResult, ...]
    cells: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def counts(self) -> dict[str, int]:
        """Mutants per fate, every fate named."""
        found = Counter(m.fate for m in self.mutants)
        return {fate: found.get(fate, 0) for fate in FATES}

    @property
    def kill_rate(self) -> float | None:
        """The entry's :func:`kill_rate`."""
        return kill_rate(self.counts)


@dataclass(frozen=True)
class MutationRun:
    """Every entry mutated, in registry order, and the gate's threshold (None: no gate)."""

    entries: tuple[EntryMutation, ...]
    min_kill_rate: float | None = None

    @property
    def counts(self) -> dict[str, int]:
        total: Counter = Counter()
        for entry in self.entries:
            total.update(entry.counts)
        return {fate: total.get(fate, 0) for fate in FATES}

    @property
    def kill_rate(self) -> float | None:
        """The run's :func:`kill_rate`."""
        return kill_rate(self.counts)

    @property
    def first_kills(self) -> dict[str, int]:
        """Check -> how many mutants it killed first, over the whole run: the checks' own adequacy table."""
        found = Counter(m.killed_by.split(" ")[0] for e in self.entries for m in e.mutants if m.fate == KILLED)
        return dict(found.most_common())

    def below(self) -> list[EntryMutation]:
        """The entries whose kill rate is under the threshold (none without one)."""
        if self.min_kill_rate is None:
            return []
        return [e for e in self.entries if e.kill_rate is not None and e.kill_rate < self.min_kill_rate]


def to_json(run: MutationRun) -> dict[str, Any]:
    """``mutation.json``: the run's counts and kill rate, the first-kill table, and every entry's mutants."""
    return {
        "schema": SCHEMA,
        "counts": run.counts,
        "kill_rate": run.kill_rate,
        "min_kill_rate": run.min_kill_rate,
        "first_kills": run.first_kills,
        "entries": [{
            "name": e.name, "owners": list(e.owners), "counts": e.counts, "kill_rate": e.kill_rate,
            "cells": list(e.cells), "notes": list(e.notes),
            "mutants": [{"number": m.number, "function": m.function, "operator": m.operator, "diff": m.diff,
                         "fate": m.fate, "reason": m.reason, "killed_by": m.killed_by, "passed": list(m.passed),
                         "differs": m.differs, "suggestion": m.suggestion} for m in e.mutants],
        } for e in run.entries],
    }

"""Two matrices compared: what regressed, what was fixed, what changed underneath (code or environment).

Cells are matched by (entry, check, dtype, device). Pure data in, a frozen :class:`Diff` out; the
reporters in :mod:`audit.reporters.changes` render it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from audit.results.causes import identity, title
from audit.results.cells import Cell
from audit.results.environment import FIELDS as MACHINE
from audit.results.matrix import Matrix, MatrixEntry

GATING = {"fail", "error"}
WORKING = {"pass", "xpass"}
#: Environment keys that describe the machine and software; a change in any is an environment change.
ENVIRONMENT_KEYS = MACHINE + ("examples", "compile_backend", "seed")

#: Change classes, in the order a reader meets them.
CLASSES = ("regression", "fix", "still_failing", "newly_unsupported", "newly_passing", "newly_skipped",
           "no_longer_skipped", "other", "accuracy_drift")
TITLES = {
    "regression": "Regressions: did not fail before, fail or error now",
    "fix": "Fixes: failed or errored before, do not now",
    "still_failing": "Still failing",
    "newly_unsupported": "Newly unsupported: held before, does not hold now (not claimed)",
    "newly_passing": "Newly passing: the claim could be raised",
    "newly_skipped": "Newly skipped: no longer verified here",
    "no_longer_skipped": "No longer skipped",
    "other": "Other status changes",
    "accuracy_drift": "Accuracy drift: the same status, an error ratio grown by more than 1.5x (does not gate)",
}
#: A cell's ``metrics.error_ratio`` (its error over the reference's own in a low precision) that grew by more than
#: this factor is an accuracy drift, when it reaches at least DRIFT_FROM: below half of what the reference itself
#: does, a ratio moves with the draw and says nothing.
DRIFT, DRIFT_FROM = 1.5, 0.5


@dataclass(frozen=True)
class CellChange:
    """One matched cell whose status differs (or that still fails)."""

    entry: str
    owners: tuple[str, ...]
    check: str
    dtype: str
    device: str
    old: str
    new: str
    kind: str
    message: str
    repro: str
    #: The new cell's declared failure kind (``Cell.kind``), what regressions are grouped by.
    finding: str = ""

    @property
    def where(self) -> str:
        """``entry check (dtype, device)``."""
        return f"{self.entry} {self.check} ({self.dtype}, {self.device})"


@dataclass(frozen=True)
class ChangeCause:
    """Changed cells of one cause (:mod:`audit.results.causes`: check, masked kind, masked message)."""

    check: str
    kind: str
    pattern: str
    changes: tuple[CellChange, ...]

    @property
    def title(self) -> str:
        """The cause in one line."""
        return title(self.check, self.kind, self.pattern)

    @property
    def owners(self) -> tuple[str, ...]:
        """Everyone who owns one of its cells' entries, sorted."""
        return tuple(sorted({o for c in self.changes for o in c.owners or ("(no owner)",)}))

    @property
    def entries(self) -> tuple[str, ...]:
        """Its entries' names, each once, in order."""
        return tuple(dict.fromkeys(c.entry for c in self.changes))


def by_cause(changes: tuple[CellChange, ...]) -> tuple[ChangeCause, ...]:
    """``changes`` grouped by cause, the cause of most entries first, then in order of their first change."""
    found: dict[tuple[str, str, str], list[CellChange]] = {}
    for change in changes:
        found.setdefault(identity(change.check, change.finding, change.message, (change.entry,)), []).append(change)
    made = [ChangeCause(*key, tuple(members)) for key, members in found.items()]
    return tuple(sorted(made, key=lambda c: -len(c.entries)))  # sorted() is stable: first changes first


@dataclass(frozen=True)
class Diff:
    """Everything that differs between an old and a new matrix."""

    changes: tuple[CellChange, ...]
    entries_added: tuple[str, ...]
    entries_removed: tuple[str, ...]
    cells_added: tuple[str, ...]
    cells_removed: tuple[str, ...]
    digests_changed: tuple[str, ...]
    environment_changed: tuple[tuple[str, object, object], ...]
    old_verdict: str
    new_verdict: str

    def of(self, kind: str) -> tuple[CellChange, ...]:
        """The changes of one class."""
        return tuple(c for c in self.changes if c.kind == kind)

    @property
    def regressed(self) -> bool:
        """Whether any cell regressed: the diff's exit code is 1."""
        return bool(self.of("regression"))

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form, keys sorted by the writer."""
        return {
            "schema": "audit-diff/1",
            "verdict": "regression" if self.regressed else "no regression",
            "old_verdict": self.old_verdict, "new_verdict": self.new_verdict,
            "changes": {kind: [_change_json(c) for c in self.of(kind)] for kind in CLASSES},
            "entries_added": list(self.entries_added), "entries_removed": list(self.entries_removed),
            "cells_added": list(self.cells_added), "cells_removed": list(self.cells_removed),
            "digests_changed": list(self.digests_changed),
            "environment_changed": {key: {"old": old, "new": new} for key, old, new in self.environment_changed},
        }


def classify(old: str, new: str, old_gates: bool | None = None, new_gates: bool | None = None) -> str | None:
    """The class of a status change (None: unchanged and not failing). Whether each cell gates defaults to
    its status being fail or error; :func:`diff` passes it from the claim (an unclaimed cell never gates)."""
    old_gates = old in GATING if old_gates is None else old_gates
    new_gates = new in GATING if new_gates is None else new_gates
    if new_gates:
        return "still_failing" if old_gates else "regression"
    if old_gates:
        return "fix"
    if old == new:
        return None
    if new == "skip":
        return "newly_skipped"
    if old == "skip":
        return "no_longer_skipped"
    if old in WORKING and new in ("unsupported", "waived"):
        return "newly_unsupported"
    if old in ("unsupported", "waived") and new in WORKING:
        return "newly_passing"
    return "other"


def diff(old: Matrix, new: Matrix) -> Diff:
    """Compare two matrices."""
    old_entries = {e.name: e for e in old.entries}
    new_entries = {e.name: e for e in new.entries}
    changes, cells_added, cells_removed, digests = [], [], [], []
    for name, entry in new_entries.items():
        before = old_entries.get(name)
        if before is None:
            continue
        if before.digest != entry.digest:
            digests.append(name)
        old_cells, new_cells = _cells(before), _cells(entry)
        cells_added += [_label(name, key) for key in new_cells if key not in old_cells]
        cells_removed += [_label(name, key) for key in old_cells if key not in new_cells]
        for key, cell in new_cells.items():
            if key in old_cells:
                old_cell = old_cells[key]
                kind = classify(old_cell.status.value, cell.status.value, old_cell.gates(strict=False),
                                cell.gates(strict=False))
                drift = "" if kind else drifted(old_cell.metrics, cell.metrics)
                if kind or drift:
                    changes.append(CellChange(name, entry.owners, *key, old_cell.status.value, cell.status.value,
                                              kind or "accuracy_drift", drift or cell.message, cell.repro, cell.kind))
    env_old, env_new = old.environment or {}, new.environment or {}
    environment = tuple((key, env_old.get(key), env_new.get(key)) for key in ENVIRONMENT_KEYS
                        if env_old.get(key) != env_new.get(key))
    return Diff(changes=tuple(changes),
                entries_added=tuple(n for n in new_entries if n not in old_entries),
                entries_removed=tuple(n for n in old_entries if n not in new_entries),
                cells_added=tuple(cells_added), cells_removed=tuple(cells_removed),
                digests_changed=tuple(digests), environment_changed=environment,
                old_verdict=_verdict(old), new_verdict=_verdict(new))


def drifted(old: dict[str, Any], new: dict[str, Any]) -> str:
    """Which error ratios grew by more than DRIFT between two cells' metrics, in one line ("" if none)."""
    before, after = old.get("error_ratio") or {}, new.get("error_ratio") or {}
    grown = [f"{name}: error ratio {before[name]:g} -> {ratio:g}" for name, ratio in sorted(after.items())
             if name in before and ratio >= DRIFT_FROM and ratio > DRIFT * before[name]]
    return "; ".join(grown) + (" (its error over what the reference itself achieves in this dtype)" if grown else "")


def _verdict(matrix: Matrix) -> str:
    return "?" if matrix.verdict is None else matrix.verdict


def _cells(entry: MatrixEntry) -> dict[tuple[str, str, str], Cell]:
    return {(c.check, c.dtype, c.device): c for c in entry.cells}


def _label(name: str, key: tuple[str, str, str]) -> str:
    check, dtype, device = key
    return f"{name} {check} ({dtype}, {device})"


def _change_json(change: CellChange) -> dict[str, Any]:
    return {"entry": change.entry, "owner": list(change.owners), "check": change.check, "dtype": change.dtype,
            "device": change.device, "old": change.old, "new": change.new, "message": change.message,
            "repro": change.repro} | ({"kind": change.finding} if change.finding else {})

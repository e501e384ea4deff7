"""Judged results: a cell's status from what was observed, what is claimed and what is waived."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from audit.core.contract import Status
from audit.registry.model import Entry
from audit.results.outcome import Failure, Outcome, Verdict
from audit.results.passthrough import missing, restore, unknown


@dataclass(frozen=True)
class CellFailure:
    """One of a cell's distinct failures: what it said, its shrunk case, and the command that runs its own
    replay script."""

    message: str
    case: dict[str, Any] | None = None
    repro: str = ""
    script: str | None = field(default=None, compare=False, repr=False)
    #: What the failure is, as declared where it was found (an extension: written when set).
    kind: str = ""
    #: Keys of the failure object this version does not model, kept as read.
    extra: dict[str, Any] = field(default_factory=dict)
    #: The keys :meth:`to_json` writes that the object read lacked (left out again when written).
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def to_json(self) -> dict[str, Any]:
        """The contract's failure object."""
        data = {"message": self.message, "case": self.case, "repro": self.repro}
        return restore(data | ({"kind": self.kind} if self.kind else {}), self.extra, self.absent)

    @staticmethod
    def from_json(data: dict[str, Any]) -> CellFailure:
        """The inverse of :meth:`to_json`."""
        return CellFailure(data.get("message", ""), data.get("case"), data.get("repro", ""), kind=data.get("kind", ""),
                           extra=unknown(data, FAILURE_KEYS + ("kind",)), absent=missing(data, FAILURE_KEYS))


FAILURE_KEYS = ("message", "case", "repro")
#: The keys of the contract's cell object: always written (the first row), written when set (the second).
CELL_KEYS = ("check", "dtype", "device", "status", "claimed", "examples", "seconds", "message", "repro")
CELL_OPTIONAL_KEYS = ("case", "expected", "metrics", "failures", "kind")


@dataclass(frozen=True)
class Cell:
    """One (entry, check, dtype, device) of the matrix."""

    check: str
    dtype: str
    device: str
    status: Status
    claimed: bool
    examples: int = 0
    seconds: float = 0.0
    message: str = ""
    repro: str = ""
    case: dict[str, Any] | None = None
    expected: bool = False
    metrics: dict[str, Any] = field(default_factory=dict)
    script: str | None = field(default=None, compare=False, repr=False)
    failures: tuple[CellFailure, ...] = ()
    #: The declared kind of the cell's first failure, or of its error (an extension: written when set); with the
    #: check, what :mod:`audit.results.causes` groups failing cells by.
    kind: str = ""
    #: Keys of the cell object this version does not model (a newer audit's, a tool's), kept as read.
    extra: dict[str, Any] = field(default_factory=dict)
    #: The always-written keys that the cell object read lacked (left out again when written).
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    def gates(self, strict: bool) -> bool:
        """Whether this cell fails the gate. Only claims gate: an unclaimed cell (a dtype probe, a property
        not claimed) is information whatever its status, ``error`` included; under ``--strict`` its ``xpass``
        still gates, since it says the claim could be raised. An expected skip never gates."""
        if self.expected or not self.status.gates(strict):
            return False
        return self.claimed or self.status is Status.XPASS

    def scripts(self) -> tuple[str, ...]:
        """The replay script of each of the cell's failures, the first failure's first (none for a cell
        that did not fail)."""
        if not self.script:
            return ()
        return (self.script,) + tuple(f.script for f in self.failures[1:] if f.script)

    def to_json(self) -> dict[str, Any]:
        """The contract's cell object (``case``, ``expected``, ``metrics`` and ``failures`` only when set)."""
        data: dict[str, Any] = {
            "check": self.check, "dtype": self.dtype, "device": self.device, "status": self.status.value,
            "claimed": self.claimed, "examples": self.examples, "seconds": round(self.seconds, 3),
            "message": self.message, "repro": self.repro}
        if self.case is not None:
            data["case"] = self.case
        if self.expected:
            data["expected"] = True
        if self.metrics:
            data["metrics"] = self.metrics
        if self.failures:
            data["failures"] = [f.to_json() for f in self.failures]
        if self.kind:
            data["kind"] = self.kind
        return restore(data, self.extra, self.absent)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Cell:
        """The inverse of :meth:`to_json`."""
        return Cell(check=data["check"], dtype=data["dtype"], device=data["device"],
                    status=Status(data["status"]), claimed=data.get("claimed", True), examples=data.get("examples", 0),
                    seconds=data.get("seconds", 0.0), message=data.get("message", ""),
                    repro=data.get("repro", ""), case=data.get("case"), expected=data.get("expected", False),
                    metrics=data.get("metrics", {}),
                    failures=tuple(CellFailure.from_json(f) for f in data.get("failures", ())),
                    kind=data.get("kind", ""),
                    extra=unknown(data, CELL_KEYS + CELL_OPTIONAL_KEYS), absent=missing(data, CELL_KEYS))


def judge(entry: Entry, outcome: Outcome, *, claimed: bool, claim: str, today: str, repro: str,
          replays: Iterable[str] = ()) -> Cell:
    """Apply the claim and any waiver to a raw outcome. ``replays``: the command that runs each failure's
    replay script, the first failure's first (empty where no script is written)."""
    key = outcome.key
    status, message, expected = _status(entry, outcome, claimed, claim, today)
    return Cell(check=key.check, dtype=key.dtype, device=key.device, status=status, claimed=claimed,
                examples=outcome.examples, seconds=outcome.seconds, message=message, repro=repro,
                case=outcome.case, expected=expected, metrics=dict(outcome.details), script=outcome.script,
                failures=_failures(outcome, tuple(replays)), kind=outcome.kind)


def _failures(outcome: Outcome, replays: tuple[str, ...]) -> tuple[CellFailure, ...]:
    """Every distinct failure, the first failure first, when there are several; none for one failure,
    which the cell's own ``message``, ``case`` and ``repro`` say."""
    if not outcome.others:
        return ()
    found = (Failure(outcome.message, outcome.case, outcome.script, outcome.kind),) + outcome.others
    replays += ("",) * (len(found) - len(replays))
    return tuple(CellFailure(f.message, f.case, r, f.script, f.kind) for f, r in zip(found, replays))


def _status(entry: Entry, outcome: Outcome, claimed: bool, claim: str, today: str) -> tuple[Status, str, bool]:
    key = outcome.key
    waiver = next((w for w in entry.expect if w.covers(key.check, key.dtype, key.device)), None)
    if outcome.verdict == Verdict.ERRORED:
        return Status.ERROR, outcome.message, False
    if outcome.verdict == Verdict.SKIPPED:
        if waiver and waiver.status == "skip" and not waiver.expired(today):
            return Status.SKIP, f"expected skip ({waiver.reason}): {outcome.message}", True
        return Status.SKIP, outcome.message, False
    held = outcome.verdict == Verdict.HELD
    partly = f"; {outcome.message}" if held and outcome.message else ""  # what it judged, where a part did not run
    if not claimed:
        if held:
            hint = f"; claim it with {claim}: true" if claim else ""
            if claim == "supports.dtypes":  # a probed dtype is claimed by listing it, not with true
                hint = f"; claim it by adding {key.dtype} to supports.dtypes"
            return Status.XPASS, f"not claimed, yet held on {outcome.examples} examples{hint}{partly}", False
        return Status.UNSUPPORTED, f"not claimed ({claim or 'unclaimed'}); {outcome.message}", False
    if waiver is None or waiver.status != "fail":
        return (Status.PASS, outcome.message, False) if held else (Status.FAIL, outcome.message, False)
    if held:
        return Status.XPASS, (f"waived ({waiver.reason}), yet held on {outcome.examples} examples; "
                              f"remove the expect entry{partly}"), False
    if waiver.expired(today):
        return Status.FAIL, f"waiver expired on {waiver.until} ({waiver.reason}); {outcome.message}", False
    until = f" until {waiver.until}" if waiver.until else ""
    return Status.WAIVED, f"waived{until} ({waiver.reason}); {outcome.message}", False

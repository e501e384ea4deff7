"""What a worker observed for one cell, before the judge applies claims and waivers."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from audit.results.kinds import ErrorKind


class Verdict(str, enum.Enum):
    """What a worker observed on a cell, before claims and waivers make it a :class:`~audit.core.contract.Status`.
    A ``str``: the result cache's JSON holds the plain value (``"held"``), as it always did."""

    HELD = "held"
    VIOLATED = "violated"
    SKIPPED = "skipped"
    ERRORED = "error"

    def __str__(self) -> str:
        return self.value  # the same text on every Python (3.12 changed str() and format() of mixed-in enums)


HELD, VIOLATED, SKIPPED, ERRORED = Verdict.HELD, Verdict.VIOLATED, Verdict.SKIPPED, Verdict.ERRORED
VERDICTS = tuple(Verdict)


@dataclass(frozen=True)
class CellKey:
    """One (check, dtype, device) of an entry."""

    check: str
    dtype: str
    device: str


@dataclass(frozen=True)
class Failure:
    """A further distinct failure of a cell: what it said, its shrunk case and its own replay script."""

    message: str
    case: dict[str, Any] | None = None
    script: str | None = None
    #: What the failure is, as it was declared where it was found (``Violation.kind``), without where or how much.
    kind: str = ""


@dataclass(frozen=True)
class Outcome:
    """The raw result of running one check on one cell's drawn examples; a violated cell's first failure
    is in ``message``, ``case`` and ``script``, failures of other kinds in ``others``."""

    key: CellKey
    verdict: Verdict
    message: str = ""
    examples: int = 0
    seconds: float = 0.0
    case: dict[str, Any] | None = None
    script: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    others: tuple[Failure, ...] = ()
    #: The first failure's declared kind; an error's :class:`~audit.results.kinds.ErrorKind`; "" otherwise.
    kind: str = ""


def error_outcome(key: CellKey, message: str, kind: ErrorKind) -> Outcome:
    """An ``error`` outcome: the audit could not decide, for a reason of ``kind``."""
    return Outcome(key, Verdict.ERRORED, message, kind=kind.value)


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """An outcome as plain data (for the result cache)."""
    return {"check": outcome.key.check, "dtype": outcome.key.dtype, "device": outcome.key.device,
            "verdict": outcome.verdict.value, "message": outcome.message, "examples": outcome.examples,
            "seconds": outcome.seconds, "case": outcome.case, "script": outcome.script, "details": outcome.details,
            "others": [{"message": f.message, "case": f.case, "script": f.script, "kind": f.kind}
                       for f in outcome.others],
            "kind": outcome.kind}


def outcome_from_json(data: dict[str, Any]) -> Outcome:
    """The inverse of :func:`outcome_to_json`; a record written before ``others`` or ``kind`` existed has none.
    ValueError on a verdict this audit does not know."""
    others = tuple(Failure(f["message"], f["case"], f["script"], f.get("kind", "")) for f in data.get("others", ()))
    return Outcome(CellKey(data["check"], data["dtype"], data["device"]), Verdict(data["verdict"]), data["message"],
                   data["examples"], data["seconds"], data["case"], data["script"], data["details"], others,
                   data.get("kind", ""))

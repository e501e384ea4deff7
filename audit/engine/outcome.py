"""What a worker observed for one cell, before the judge applies claims and waivers."""

from __future__ import annotations

from dataclasses import dataclass, field

HELD, VIOLATED, SKIPPED, ERRORED = "held", "violated", "skipped", "error"
VERDICTS = (HELD, VIOLATED, SKIPPED, ERRORED)


@dataclass(frozen=True)
class CellKey:
    """One (check, dtype, device) of an entry."""

    check: str
    dtype: str
    device: str


@dataclass(frozen=True)
class Outcome:
    """The raw result of running one check on one cell's drawn examples."""

    key: CellKey
    verdict: str
    message: str = ""
    examples: int = 0
    seconds: float = 0.0
    case: dict | None = None
    script: str | None = None
    details: dict = field(default_factory=dict)


def outcome_to_json(outcome: Outcome) -> dict:
    """An outcome as plain data (for the result cache)."""
    return {"check": outcome.key.check, "dtype": outcome.key.dtype, "device": outcome.key.device,
            "verdict": outcome.verdict, "message": outcome.message, "examples": outcome.examples,
            "seconds": outcome.seconds, "case": outcome.case, "script": outcome.script, "details": outcome.details}


def outcome_from_json(data: dict) -> Outcome:
    """The inverse of :func:`outcome_to_json`."""
    return Outcome(CellKey(data["check"], data["dtype"], data["device"]), data["verdict"], data["message"],
                   data["examples"], data["seconds"], data["case"], data["script"], data["details"])

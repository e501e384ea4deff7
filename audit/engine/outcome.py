"""What a worker observed for one cell, before the judge applies claims and waivers."""

from __future__ import annotations

from dataclasses import dataclass, field

HELD, VIOLATED, SKIPPED, ERRORED = "held", "violated", "skipped", "error"


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

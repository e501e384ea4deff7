"""How each cell status is shown: one row per status, read by every reporter (mark, colour, emoji, meaning,
JUnit element, how bad it is)."""

from __future__ import annotations

from dataclasses import dataclass

from audit.core.contract import Status


@dataclass(frozen=True)
class Presentation:
    """One status's looks. ``severity`` ranks it, 0 the worst: a group of cells (one check over several dtypes or
    devices) is shown as its worst. ``junit`` is the element a JUnit test case gets (``""``: none, it passed)."""

    symbol: str
    style: str
    emoji: str
    meaning: str
    severity: int
    junit: str = ""


#: Every status, in the order a legend lists them.
PRESENTATION: dict[Status, Presentation] = {
    Status.PASS: Presentation("✓", "green", "✅", "held on every example", 6),
    Status.FAIL: Presentation("✗", "bold red", "❌", "a claimed property was violated", 1, "failure"),
    Status.ERROR: Presentation("!", "bold magenta", "💥", "the audit could not decide", 0, "error"),
    Status.UNSUPPORTED: Presentation("–", "dim", "➖", "not claimed, does not hold", 5, "skipped"),
    Status.WAIVED: Presentation("w", "yellow", "🟡", "fails, covered by a waiver", 4, "skipped"),
    Status.XPASS: Presentation("+", "cyan", "⬆️", "holds though not claimed", 2),
    Status.SKIP: Presentation("s", "blue", "⏭️", "not run here", 3, "skipped"),
}

#: Worst first.
SEVERITY = tuple(sorted(PRESENTATION, key=lambda status: PRESENTATION[status].severity))
#: The order a report offers the statuses to filter by: those that fail the gate first, then the rest worst first.
FILTERS = (tuple(s for s in PRESENTATION if s.gates(strict=False))
           + tuple(s for s in SEVERITY if not s.gates(strict=False)))


def symbol(status: str) -> str:
    """The mark of a status named in a matrix (``"?"`` for one this version does not know)."""
    known = {s.value: s for s in Status}.get(status)
    return PRESENTATION[known].symbol if known else "?"


def junit_statuses(element: str) -> frozenset[Status]:
    """The statuses whose JUnit test case gets ``element`` (``failure``, ``error``, ``skipped``)."""
    return frozenset(s for s, shown in PRESENTATION.items() if shown.junit == element)

"""A plant's matrix held to its expectations: every expected cell found, with the status expected."""

from __future__ import annotations

from dataclasses import dataclass

from bench.gpu.plants import Expected, Plant

#: How much of a cell's message a mismatch quotes.
QUOTED = 300


@dataclass(frozen=True)
class Mismatch:
    """An expectation a run did not meet: no such cell, or a cell with another status (and what it said)."""

    expected: Expected
    got: str  #: the status found, or "missing"
    message: str = ""

    def __str__(self) -> str:
        said = f": {self.message}" if self.message else ""
        return f"{self.expected}, got {self.got}{said}"


def mismatches(plant: Plant, matrix: dict) -> tuple[Mismatch, ...]:
    """Every expectation of ``plant`` that ``matrix`` (a parsed ``matrix.json``) does not meet, in the plant's order."""
    cells = _cells(matrix)
    found = []
    for expected in plant.expected():
        mine = cells.get((expected.entry, expected.check, expected.device), [])
        if not mine:
            found.append(Mismatch(expected, "missing"))
        found += [Mismatch(expected, cell["status"], quoted(cell.get("message", ""))) for cell in mine
                  if cell["status"] != expected.status]
    return tuple(found)


def not_run(plant: Plant, why: str) -> tuple[Mismatch, ...]:
    """Every expectation of a plant whose run gave no matrix, each saying why."""
    return tuple(Mismatch(expected, "missing", why) for expected in plant.expected())


def _cells(matrix: dict) -> dict[tuple[str, str, str], list[dict]]:
    found: dict[tuple[str, str, str], list[dict]] = {}
    for entry in matrix.get("entries", []):
        for cell in entry.get("cells", []):
            found.setdefault((entry["name"], cell["check"], cell["device"]), []).append(cell)
    return found


def quoted(message: str) -> str:
    """A message on one line, cut at :data:`QUOTED` characters."""
    line = " ".join(message.split())
    return line if len(line) <= QUOTED else line[:QUOTED] + "..."

"""What a pytest run gave, read from its JUnit XML (``--junitxml``)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PytestCounts:
    """Tests run, passed, failed (failures and errors) and skipped; the failed ones by name, each with its
    message's first line; the skip reasons."""

    passed: int
    failed: int
    skipped: int
    failures: tuple[str, ...] = ()
    skips: tuple[str, ...] = ()

    def counts(self) -> tuple[tuple[str, int], ...]:
        """The numbers, as a stage reports them."""
        return (("passed", self.passed), ("failed", self.failed), ("skipped", self.skipped))


def read(path: Path) -> PytestCounts:
    """The counts of a JUnit XML file; raises ``OSError`` or ``ET.ParseError`` when there is none to read."""
    failures, skips, passed = [], [], 0
    for case in ET.parse(path).getroot().iter("testcase"):
        name = f"{case.get('classname', '')}::{case.get('name', '')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skip = case.find("skipped")
        if bad is not None:
            failures.append(f"{name}: {_first_line(bad.get('message', ''))}")
        elif skip is not None:
            skips.append(f"{name}: {_first_line(skip.get('message', ''))}")
        else:
            passed += 1
    return PytestCounts(passed, len(failures), len(skips), tuple(failures), tuple(skips))


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0][:300] if lines else "(no message)"

"""What a stage of the acceptance run gives, and what the whole run gives: frozen results, one verdict."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Status(str, Enum):
    """How a stage ended."""

    PASS = "pass"
    FAIL = "fail"  #: it ran and something it checks did not hold
    TIMED_OUT = "timeout"  #: it ran past its time and was stopped
    SKIPPED = "skip"  #: not run here (no CUDA, the deadline spent); always with the reason
    ERROR = "error"  #: it could not run (a command that would not start, an unreadable result)


@dataclass(frozen=True)
class StageResult:
    """One stage: its status, a line saying what happened, how long it took, its counts, each problem found (a
    failed test, a failing cell, an expectation not met), its notes, the command it ran and where its output went."""

    name: str
    status: Status
    detail: str = ""
    seconds: float = 0.0
    counts: tuple[tuple[str, int], ...] = ()
    problems: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()  #: worth knowing, not a failure: the reason of each test skipped
    command: str = ""
    log: str = ""  #: the log's path, relative to the run's folder
    tail: str = ""  #: the log's last lines, kept when the stage did not pass


@dataclass(frozen=True)
class Summary:
    """The whole run: when it started, how long it took against its deadline, the machine's facts, each stage."""

    started: str
    seconds: float
    deadline: float
    facts: dict
    stages: tuple[StageResult, ...]

    @property
    def passed(self) -> bool:
        """Every stage ran and passed (a stage skipped for want of CUDA or of time is not a pass)."""
        return bool(self.stages) and all(stage.status == Status.PASS for stage in self.stages)

    @property
    def exit_code(self) -> int:
        """0 when the run passed, else 1."""
        return 0 if self.passed else 1

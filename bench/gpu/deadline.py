"""The whole run's time: a deadline, and how much of it each stage may have."""

from __future__ import annotations

from dataclasses import dataclass

#: A stage is not started with less than this left: it could not even start a worker and import torch.
MINIMUM = 15.0
#: How far past its allowance a stage may end before it is recorded as timed out (killing takes a moment).
GRACE = 20.0


@dataclass(frozen=True)
class Deadline:
    """``total`` seconds from ``start`` (a monotonic reading), of which ``reserve`` is kept for the summary."""

    start: float
    total: float
    reserve: float = 10.0

    def left(self, now: float) -> float:
        """Seconds left for stages at ``now``."""
        return self.start + self.total - self.reserve - now

    def allowance(self, budget: float, now: float, later: float = 0.0) -> float:
        """Seconds a stage of ``budget`` may run, started at ``now`` with stages of ``later`` seconds of budget still to
        run: its budget and what earlier stages left unused, keeping the later ones' budgets; never more than is left,
        and 0 when less than :data:`MINIMUM` would be."""
        left = self.left(now)
        allowed = min(left, max(budget, left - later))
        return allowed if allowed >= MINIMUM else 0.0


def overran(seconds: float, allowed: float) -> bool:
    """Whether a stage that took ``seconds`` ran past its ``allowed`` time (beyond :data:`GRACE`)."""
    return seconds > allowed + GRACE

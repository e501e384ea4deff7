"""Watching an entry for changes to torch itself (:mod:`audit.runtime.fingerprint`): what its cells record, and
why its worker retires after it."""

from __future__ import annotations

from dataclasses import replace

from audit.results.outcome import Outcome
from audit.runtime.fingerprint import METRIC, Change, Fingerprint, changes, take


class Watch:
    """The changes an entry made to torch since the worker started (``start``); ``module`` names the entry's code
    where a change does not name its own."""

    def __init__(self, start: Fingerprint, module: str) -> None:
        self.start, self.module = start, module
        self.found: tuple[Change, ...] = ()

    def look(self, operators: bool = False) -> None:
        """Compare torch now with the worker's start: after the target loads (``operators``: also the aten
        operators defined, 10 ms), and after each cell (0.3 ms)."""
        self.found = changes(self.start, take(operators))

    def sentences(self) -> list[str]:
        """One sentence per change: ``importing pkg replaced torch.softmax``."""
        return [change.sentence(self.module) for change in self.found]

    def mark(self, outcome: Outcome) -> Outcome:
        """``outcome``, recording the changes found so far under the metric :data:`METRIC`."""
        if not self.found:
            return outcome
        return replace(outcome, details={**outcome.details, METRIC: self.sentences()})

    def reason(self) -> str:
        """Why the worker must retire after this entry ("" when torch is as it started)."""
        return f"its torch was changed ({'; '.join(self.sentences())})" if self.found else ""

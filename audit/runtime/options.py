"""Options of one audit run, as the engine and its workers see them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    """How many examples, which seed, time budgets, per-worker memory cap, compile backend.

    ``timeout`` bounds one claimed check; an unclaimed cell gets at most ``unclaimed_timeout``; a worker's
    start-up (importing torch, then the entry's target) gets the longer of ``startup_timeout`` and ``timeout``.
    """

    examples: int = 20
    seed: int = 0
    timeout: float = 300.0
    unclaimed_timeout: float = 30.0
    startup_timeout: float = 120.0
    max_memory: int = 8 << 30
    jobs: int = 1
    base: str = "."
    checks_dir: str | None = None
    compile_backend: str = "aot_eager"
    cache_dir: str | None = None
    cache_size: int = 512 << 20
    failures: int = 3  #: distinct failures a failing claimed cell looks for (1: only the first)
    triton_interpret: bool = False  #: an entry has ``triton: interpret`` (see :mod:`audit.runtime.triton`)

    @property
    def unclaimed_examples(self) -> int:
        """Unclaimed properties need one counterexample, not a thorough search."""
        return max(1, min(self.examples, 5))

    @property
    def startup_budget(self) -> float:
        """Seconds a worker may take to start and load an entry's target: generous, apart from ``timeout``
        (a loaded machine may take many seconds to import torch; a short ``timeout`` must not count that)."""
        return max(self.startup_timeout, self.timeout)

    def cell_budget(self, claimed: bool) -> float:
        """Seconds one cell may run: ``timeout``; an unclaimed cell cannot fail the gate, so it is not waited
        for longer than ``unclaimed_timeout``."""
        return self.timeout if claimed else min(self.timeout, self.unclaimed_timeout)


def cell_seed(seed: int, entry: str, check: str, dtype: str, device: str) -> int:
    """A per-cell seed derived from the run's seed; stable whatever else is selected or sharded."""
    text = f"{seed}:{entry}:{check}:{dtype}:{device}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")

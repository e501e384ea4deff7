"""Options of one audit run, as the engine and its workers see them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


@dataclass(frozen=True)
class RunOptions:
    """How many examples, which seed, per-check timeout, per-worker memory cap, compile backend."""

    examples: int = 20
    seed: int = 0
    timeout: float = 300.0
    max_memory: int = 8 << 30
    jobs: int = 1
    base: str = "."
    checks_dir: str | None = None
    compile_backend: str = "aot_eager"
    cache_dir: str | None = None
    cache_size: int = 512 << 20

    @property
    def unclaimed_examples(self) -> int:
        """Unclaimed properties need one counterexample, not a thorough search."""
        return max(1, min(self.examples, 5))


def cell_seed(seed: int, entry: str, check: str, dtype: str, device: str) -> int:
    """A per-cell seed derived from the run's seed; stable whatever else is selected or sharded."""
    text = f"{seed}:{entry}:{check}:{dtype}:{device}".encode()
    return int.from_bytes(hashlib.sha256(text).digest()[:4], "big")

"""Options of one audit run, as the engine and its workers see them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from audit.runtime.settings import Settings, flag, parse_size

#: Every setting at its default: where the engine's defaults come from.
_DEFAULT = Settings()


@dataclass(frozen=True)
class RunOptions:
    """How many examples, which seed, time budgets, per-worker memory cap, compile backend: the run's
    :class:`~audit.runtime.settings.Settings` that the engine reads (sizes in bytes), and what the engine derives
    for itself (the registry's folder, its local checks, the cache's folder).

    ``timeout`` bounds one claimed check; an unclaimed cell gets at most ``unclaimed_timeout``; a worker's
    start-up (importing torch, then the entry's target) gets the longer of ``startup_timeout`` and ``timeout``.
    """

    examples: int = _DEFAULT.examples
    seed: int = _DEFAULT.seed
    timeout: float = _DEFAULT.timeout
    unclaimed_timeout: float = _DEFAULT.unclaimed_timeout
    startup_timeout: float = 120.0
    max_memory: int = parse_size(_DEFAULT.max_memory)
    jobs: int = _DEFAULT.jobs
    base: str = "."
    checks_dir: str | None = None
    compile_backend: str = _DEFAULT.compile_backend
    cache_dir: str | None = None
    cache_size: int = parse_size(_DEFAULT.cache_size)
    failures: int = 3  #: distinct failures a failing claimed cell looks for (1: only the first)
    shrink: bool = True  #: a failing claimed cell shrinks its case (``audit mutate``: the first failure decides)
    triton_interpret: bool = False  #: an entry has ``triton: interpret`` (see :mod:`audit.runtime.triton`)

    @staticmethod
    def of(settings: Settings, base: str = ".", checks_dir: str | None = None,
           triton_interpret: bool = False) -> RunOptions:
        """The engine's view of ``settings`` for a registry in the folder ``base``: sizes parsed (a bad one is a
        usage error naming its flag), the cache's folder (``.audit-cache`` beside the registry unless given) only
        with the cache on."""
        cache_dir = str(Path(settings.cache_dir or Path(base) / ".audit-cache")) if settings.cache else None
        return RunOptions(examples=settings.examples, seed=settings.seed, timeout=settings.timeout,
                          unclaimed_timeout=settings.unclaimed_timeout,
                          max_memory=parse_size(settings.max_memory, flag("max_memory")), jobs=settings.jobs, base=base,
                          checks_dir=checks_dir, compile_backend=settings.compile_backend, cache_dir=cache_dir,
                          cache_size=parse_size(settings.cache_size, flag("cache_size")),
                          triton_interpret=triton_interpret)

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

"""A warm pre-merge run against ``python -c 'import torch'``, paired: the floor a run the cache serves whole is held to.

For this repository's registry and the benchmark registry: one cold ``--profile premerge`` run fills a fresh cache,
one warm run settles it, then ``ROUNDS`` pairs, each a warm run and an ``import torch`` back to back (which goes first
alternates), and the median of the pairs' ratios. Both run as Python does by default, caching bytecode
(:data:`bench.timing.ENV`). Run: ``python -m bench.warm`` (prints the section).
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

from bench.timing import REGISTRY, ROOT, audit_run, timed, print_section

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
REGISTRIES = {"this repository's (`registry.yaml`)": ROOT / "registry.yaml",
              "benchmark (`bench/registry.yaml`)": REGISTRY}
IMPORT_TORCH = [sys.executable, "-c", "import torch"]


def paired(registry: Path, work: Path) -> dict[str, float]:
    """The cold run's seconds, the medians of the warm runs and of ``import torch``, and the median paired ratio."""
    args = ("--profile", "premerge", "--cache-dir", str(work / "cache"))
    cold = timed(audit_run(registry, work / "out", *args))
    timed(audit_run(registry, work / "out", *args))
    pairs = [_pair(audit_run(registry, work / "out", *args), torch_first=bool(round_ % 2)) for round_ in range(ROUNDS)]
    warm, torch = [w for w, _ in pairs], [t for _, t in pairs]
    return {"cold": cold, "warm": statistics.median(warm), "torch": statistics.median(torch),
            "ratio": statistics.median(w / t for w, t in pairs)}


def _pair(warm_run: list[str], torch_first: bool) -> tuple[float, float]:
    """(a warm run's seconds, an ``import torch``'s), back to back, in the order asked."""
    if torch_first:
        torch = timed(IMPORT_TORCH)
        return timed(warm_run), torch
    warm = timed(warm_run)
    return warm, timed(IMPORT_TORCH)


def measure(work: Path) -> dict:
    """:func:`paired` for each of :data:`REGISTRIES`, by name."""
    return {name: paired(registry, work / str(k)) for k, (name, registry) in enumerate(REGISTRIES.items())}


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    return [f"One cold `--profile premerge` run into a fresh cache, one warm run, then {ROUNDS} pairs (a warm run and "
            "`python -c \"import torch\"` back to back, alternating which goes first); medians, and the median of the "
            "pairs' ratios. A run the result cache serves whole imports neither torch nor a local check.", "",
            "| registry | cold (s) | warm (s, median) | `import torch` (s, median) | **warm / import torch** "
            "(median of pairs; target ≤ 1.0) |", "|---|---|---|---|---|",
            *[f"| {name} | {m['cold']:.1f} | {m['warm']:.2f} | {m['torch']:.2f} | **{m['ratio']:.2f}** |"
              for name, m in found.items()], ""]


if __name__ == "__main__":
    print_section(measure, render, "warm")

"""A warm pre-merge run against ``python -c 'import torch'``, paired: the floor a run the cache serves whole is held to.

For this repository's registry and the benchmark registry: one cold ``--profile premerge`` run fills a fresh cache,
one warm run settles it, then ``ROUNDS`` pairs, each a warm run and an ``import torch`` back to back (which goes first
alternates), and the median of the pairs' ratios. Both run as Python does by default, caching bytecode
(``PYTHONDONTWRITEBYTECODE`` unset: with it, every run compiles the audit's own source again, 0.1-0.15 s; torch's
installed bytecode is not affected). Run: ``python -m bench.warm`` (prints a Markdown table).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
from pathlib import Path

from bench.run import REGISTRY, ROOT, audit_run, timed

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "7"))
REGISTRIES = {"this repository's (`registry.yaml`)": ROOT / "registry.yaml",
              "benchmark (`bench/registry.yaml`)": REGISTRY}
IMPORT_TORCH = [sys.executable, "-c", "import torch"]
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def paired(registry: Path, work: Path) -> dict[str, float]:
    """The cold run's seconds, the medians of the warm runs and of ``import torch``, and the median paired ratio."""
    args = ("--profile", "premerge", "--cache-dir", str(work / "cache"))
    cold = timed(audit_run(registry, work / "out", *args), env=ENV)
    timed(audit_run(registry, work / "out", *args), env=ENV)
    pairs = [_pair(audit_run(registry, work / "out", *args), torch_first=bool(round_ % 2)) for round_ in range(ROUNDS)]
    warm, torch = [w for w, _ in pairs], [t for _, t in pairs]
    return {"cold": cold, "warm": statistics.median(warm), "torch": statistics.median(torch),
            "ratio": statistics.median(w / t for w, t in pairs)}


def _pair(warm_run: list[str], torch_first: bool) -> tuple[float, float]:
    """(a warm run's seconds, an ``import torch``'s), back to back, in the order asked."""
    if torch_first:
        torch = timed(IMPORT_TORCH, env=ENV)
        return timed(warm_run, env=ENV), torch
    warm = timed(warm_run, env=ENV)
    return warm, timed(IMPORT_TORCH, env=ENV)


def main() -> int:
    rows = ["| registry | cold (s) | warm (s, median) | `import torch` (s, median) | **warm / import torch** "
            "(median of pairs) |", "|---|---|---|---|---|"]
    for name, registry in REGISTRIES.items():
        with tempfile.TemporaryDirectory(prefix="audit-bench-warm-") as folder:
            found = paired(registry, Path(folder))
        rows.append(f"| {name} | {found['cold']:.1f} | {found['warm']:.2f} | {found['torch']:.2f} | "
                    f"**{found['ratio']:.2f}** |")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())

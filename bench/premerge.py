"""The pre-merge profile's cost with the result cache: cold, warm, and after a pull request touches one targets file.

A copy of the benchmark registry whose own targets module can be edited as a pull request would. Run:
``python -m bench.premerge`` (prints the section).
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
from pathlib import Path

from bench.timing import REGISTRY, ROOT, audit_run, timed, print_section

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def measure(work: Path) -> dict:
    """Cold, warm (median) and changed runs' seconds, and ``import torch``'s and an empty Python's (medians)."""
    folder = work / "premerge"
    folder.mkdir()
    shutil.copy(ROOT / "bench" / "targets.py", folder / "bench_targets_copy.py")
    (folder / "registry.yaml").write_text(REGISTRY.read_text().replace("bench.targets:", "bench_targets_copy:"))
    registry, out, cache = folder / "registry.yaml", folder / "out", folder / "cache"
    args = ("--profile", "premerge", "--cache-dir", str(cache))
    cold = timed(audit_run(registry, out, *args))
    warm = statistics.median(timed(audit_run(registry, out, *args)) for _ in range(ROUNDS + 1))
    source = folder / "bench_targets_copy.py"
    source.write_text(source.read_text() + "\n# a pull request touches this file: every Power entry re-audits\n")
    changed = timed(audit_run(registry, out, *args))
    torch = statistics.median(timed([sys.executable, "-c", "import torch"]) for _ in range(ROUNDS + 1))
    bare = statistics.median(timed([sys.executable, "-c", "pass"]) for _ in range(ROUNDS + 1))
    return {"cold": cold, "warm": warm, "changed": changed, "torch": torch, "python": bare, "ratio": warm / torch}


def render(p: dict) -> list[str]:
    """The section's body."""
    return ["`audit run --profile premerge` with a fresh `--cache-dir`, on a copy of the benchmark registry.", "",
            "| | seconds |", "|---|---|",
            f"| cold (empty cache) | {p['cold']:.1f} |",
            f"| warm, nothing changed | {p['warm']:.2f} |",
            f"| one targets file changed (the 6 Power entries and ScaleRows re-audit) | {p['changed']:.1f} |",
            f"| `python -c \"import torch\"` | {p['torch']:.2f} |",
            f"| `python -c pass` | {p['python']:.2f} |",
            f"| **warm / import torch** (target ≤ 1.10) | **{p['ratio']:.2f}** |", ""]


if __name__ == "__main__":
    print_section(measure, render, "premerge")

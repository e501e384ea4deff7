"""The cost of a behaviour record: this repository's ``--profile upgrade`` run (which records) against the same run
with ``--no-record``, paired.

``ROUNDS`` pairs, each the two runs back to back (which goes first alternates), at ``-j 2``; the medians and the
median of the pairs' ratios; and the record's size on disk. Target: the recording run at most 1.10x. Run:
``python -m bench.record`` (prints the section).
"""

from __future__ import annotations

import os
import statistics
from pathlib import Path

from bench.timing import ROOT, audit_run, print_section, timed

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
REGISTRY = ROOT / "registry.yaml"


def measure(work: Path) -> dict:
    """Seconds of each run, the median ratio, the record's bytes and file count."""
    recording = audit_run(REGISTRY, work / "recorded", "--profile", "upgrade", "-j", "2")
    plain = audit_run(REGISTRY, work / "plain", "--profile", "upgrade", "--no-record", "-j", "2")
    pairs = []
    for round_ in range(ROUNDS):
        order = [recording, plain] if round_ % 2 else [plain, recording]
        seconds = {id(command): timed(command) for command in order}
        pairs.append((seconds[id(recording)], seconds[id(plain)]))
    folder = work / "recorded" / "behaviour"
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {"recorded": statistics.median(r for r, _ in pairs), "plain": statistics.median(p for _, p in pairs),
            "ratio": statistics.median(r / p for r, p in pairs), "bytes": sum(p.stat().st_size for p in files),
            "files": len(files)}


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    return [f"This repository's `audit run --profile upgrade -j 2` (50 examples, inductor, a behaviour record) against "
            f"the same with `--no-record`, {ROUNDS} pairs back to back, alternating which goes first; medians, and "
            "the median of the pairs' ratios.", "",
            "| recording (s) | not recording (s) | **ratio** (target ≤ 1.10) | record on disk |", "|---|---|---|---|",
            f"| {found['recorded']:.1f} | {found['plain']:.1f} | **{found['ratio']:.2f}** | "
            f"{found['bytes'] / 1024:.0f} KiB in {found['files']} files |", ""]


if __name__ == "__main__":
    print_section(measure, render, "record")

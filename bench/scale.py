"""A generated registry of 1,000 entries: validating, listing and shard planning it; and a worker's peak memory.
Run: ``python -m bench.scale`` (prints the section)."""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

import yaml

from bench.timing import AUDIT, REGISTRY, audit_run, spent, timed, print_section

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def measure(work: Path) -> dict:
    """Medians of ``audit validate`` and ``audit list`` of 1,000 entries, a shard split's seconds, and a worker's
    peak resident memory (MiB) in a one-entry gradcheck run."""
    entries = [{"name": f"power_{i}", "target": "bench.targets:Power2", "inputs": [{"shape": ["B", "N"]}],
                "dims": {"B": [1, 4], "N": [1, 6]}} for i in range(1000)]
    big = work / "big.yaml"
    big.write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@bench"}, "entries": entries}))
    validate = statistics.median(timed(AUDIT + ["validate", str(big)]) for _ in range(ROUNDS + 1))
    listing = statistics.median(timed(AUDIT + ["list", "--registry", str(big)]) for _ in range(ROUNDS))
    from audit.app.shard import split

    start = time.perf_counter()
    split([f"e{i}" for i in range(1000)], 8, {f"e{i}": float(i % 17) for i in range(1000)})
    planning = time.perf_counter() - start
    return {"validate": validate, "list": listing, "shard_split": planning, "memory": _worker_memory(work)}


def _worker_memory(work: Path) -> float:
    """Peak RSS (MiB) of the largest process of a one-entry gradcheck run, the worker, measured by a fresh Python of
    its own (the largest child a process has had counts, and this one may have had larger)."""
    command = audit_run(REGISTRY, work / "memory", "--select", "power3", "--check", "gradcheck", "--no-cache")
    found = spent([sys.executable, "-c", MEASURED, *command])
    return int(found.stdout.split()[-1]) / 1024


#: A Python that runs its arguments as a command and prints the peak RSS (KiB) of its largest descendant.
MEASURED = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
            "stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def render(c: dict) -> list[str]:
    """The section's body."""
    return ["| | seconds |", "|---|---|",
            f"| `audit validate` (target < 1) | {c['validate']:.2f} |",
            f"| `audit list` (target < 0.5) | {c['list']:.2f} |",
            f"| shard planning (`split` of 1,000 entries into 8, by durations) | {c['shard_split']:.3f} |",
            f"| peak memory of a worker (one gradcheck cell on default sizes), MiB | {c['memory']:.0f} |", ""]


if __name__ == "__main__":
    print_section(measure, render, "scale")

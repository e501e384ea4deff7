"""What ``audit mutate`` costs: the benchmark registry mutated at ``-j 2``, no cache.

``python -m bench.mutation`` (from the repository root) runs ``audit mutate --registry bench/registry.yaml -j 2``
into a temporary folder and prints its section of ``bench/results.md``: the wall time (baseline audit included), the
mutants and their fates, the cost per mutant and per entry, and the kill rate of each entry. Set BENCH_JOBS for
another ``-j``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from bench.timing import AUDIT, REGISTRY, spent, print_section

JOBS = os.environ.get("BENCH_JOBS", "2")


def measure(work: Path, registry: Path = REGISTRY) -> dict:
    """The run's seconds and its ``mutation.json``."""
    found = spent(AUDIT + ["mutate", "--registry", str(registry), "--out", str(work / "mutate"), "-j", JOBS,
                           "--no-cache"])
    return {"seconds": found.wall, "report": json.loads((work / "mutate" / "mutation.json").read_text())}


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    report, seconds = found["report"], found["seconds"]
    counts = report["counts"]
    total = sum(counts.values())
    entries = report["entries"]
    mutated = [e for e in entries if e["mutants"]]
    rate = report["kill_rate"]
    lines = [
        f"`audit mutate --registry bench/registry.yaml -j {JOBS} --no-cache`.", "", "| | |", "|---|---|",
        f"| wall time, the baseline audit included (target < 600 s for 20 entries) | {seconds:.0f} s |",
        f"| entries / with Python source to mutate | {len(entries)} / {len(mutated)} |",
        f"| mutants: killed, survived, equivalent, errored | {total}: {counts['killed']}, {counts['survived']}, "
        f"{counts['equivalent']}, {counts['errored']} |",
        f"| seconds per mutant (wall, the baseline included) | {seconds / max(total, 1):.2f} |",
        f"| seconds per mutated entry | {seconds / max(len(mutated), 1):.1f} |",
        f"| kill rate over the registry | {'n/a' if rate is None else f'{rate:.0%}'} |",
        "", "| entry | mutants | killed | survived | equivalent | errored | kill rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for e in mutated:
        c = e["counts"]
        shown = "n/a" if e["kill_rate"] is None else f"{e['kill_rate']:.0%}"
        lines.append(f"| {e['name']} | {sum(c.values())} | {c['killed']} | {c['survived']} | {c['equivalent']} | "
                     f"{c['errored']} | {shown} |")
    lines += ["", "First kills by check: " + ", ".join(f"{k} {v}" for k, v in report["first_kills"].items()), ""]
    return lines


if __name__ == "__main__":
    print_section(measure, render, "mutate")

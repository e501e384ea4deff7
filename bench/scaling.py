"""Every check's run at ``-j 1`` and ``-j 2``: the parallel speed-up, each check's mean cost a cell, and what the
unclaimed probes cost. Run: ``python -m bench.scaling`` (prints the three sections)."""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

from bench.timing import REGISTRY, audit_run, timed, print_section

ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def measure(work: Path) -> dict:
    """The medians of alternated ``-j 1`` and ``-j 2`` runs, and the ``-j 1`` run's matrix."""
    one, two = [], []
    for _ in range(ROUNDS):
        one.append(timed(audit_run(REGISTRY, work / "j1", "--no-cache", "-j", "1")))
        two.append(timed(audit_run(REGISTRY, work / "j2", "--no-cache", "-j", "2")))
    matrix = json.loads((work / "j1" / "matrix.json").read_text())
    return {"j1": statistics.median(one), "j2": statistics.median(two), "rounds": (one, two), "matrix": matrix}


def render_scaling(found: dict) -> list[str]:
    """The speed-up section's body."""
    one, two = found["rounds"]
    return [f"`audit run --no-cache`, every check, {len(one)} alternated rounds, medians (`-j 1`: "
            f"{', '.join(f'{s:.1f}' for s in one)}; `-j 2`: {', '.join(f'{s:.1f}' for s in two)}).", "",
            "| | seconds |", "|---|---|", f"| `-j 1` | {found['j1']:.1f} |", f"| `-j 2` | {found['j2']:.1f} |",
            f"| **speed-up** (target ≥ 1.80) | **{found['j1'] / found['j2']:.2f}** |", ""]


def render_per_check(found: dict) -> list[str]:
    """The per-check cost section's body: the mean seconds of a cell that ran (skips left out), costliest first."""
    totals: dict[str, list[float]] = {}
    for entry in found["matrix"]["entries"]:
        for cell in entry["cells"]:
            if cell["status"] != "skip":
                totals.setdefault(cell["check"], []).append(cell["seconds"])
    rows = sorted(((name, len(v), sum(v) / len(v)) for name, v in totals.items()), key=lambda row: -row[2])
    return ["The `-j 1` run of the speed-up above.", "", "| check | cells | mean s |", "|---|---|---|",
            *[f"| {name} | {count} | {mean:.3f} |" for name, count, mean in rows], ""]


def render_unclaimed(found: dict) -> list[str]:
    """The unclaimed probes' section body: their share of the cells' time, overall and per check (skips included:
    a skip costs little)."""
    total, unclaimed, by_check = 0.0, 0.0, {}
    for entry in found["matrix"]["entries"]:
        for cell in entry["cells"]:
            total += cell["seconds"]
            if not cell.get("claimed", True):
                unclaimed += cell["seconds"]
                by_check[cell["check"]] = by_check.get(cell["check"], 0.0) + cell["seconds"]
    share = unclaimed / total if total else 0.0
    return ["What the probes cost in the `-j 1` run above: cells of a property or dtype the entry does not claim, "
            "which never gate but say what could be claimed (`xpass`) or is not supported (`unsupported`).", "",
            "| | seconds |", "|---|---|", f"| every cell | {total:.1f} |", f"| unclaimed cells | {unclaimed:.1f} |",
            f"| **unclaimed share** (target ≤ 25%) | **{100 * share:.0f}%** |", "",
            "| check (unclaimed cells only) | seconds |", "|---|---|",
            *[f"| {name} | {seconds:.1f} |" for name, seconds in sorted(by_check.items(), key=lambda item: -item[1])],
            ""]


if __name__ == "__main__":
    print_section(measure, lambda found: render_scaling(found) + render_per_check(found) + render_unclaimed(found),
                  "scaling")

"""The audit against the bare checks it wraps (``bench/floor.py``), paired, in wall-clock and in CPU time.

``audit run`` with the five checks of :data:`OVERHEAD_CHECKS` on the benchmark registry at ``-j 1``, no cache, and the
floor: one warm-up of each, then :data:`PAIRS` pairs, the order within a pair alternating. A pair's ratio is the
audit's seconds over the floor's, wall-clock and CPU (user and system, the workers included); the results are the
medians of the pairs' ratios, so that a machine busy for a while slows both sides of a pair alike. Inside the cells,
per check, from the last audit run's matrix, beside the floor's own per-check seconds.
Run: ``python -m bench.overhead`` (prints the section).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path

from bench.timing import REGISTRY, Spent, audit_run, spent, print_section

OVERHEAD_CHECKS = ["gradcheck", "gradgradcheck", "opcheck", "vmap", "compile"]
PAIRS = int(os.environ.get("BENCH_PAIRS", "7"))


def measure(work: Path) -> dict:
    """The pairs' seconds, and the last audit run's seconds per check inside its cells beside the floor's. The
    floor reads the cells and their case counts from the warm-up audit run's matrix (the counts are the seed's)."""
    checks = [arg for name in OVERHEAD_CHECKS for arg in ("--check", name)]
    audit = audit_run(REGISTRY, work / "overhead", *checks, "--no-cache", "-j", "1")
    spent(audit)  # warm-up: the page cache, the bytecode; and the matrix the floor reads
    matrix = work / "floor-matrix.json"
    matrix.write_text((work / "overhead" / "matrix.json").read_text())
    floor_command = [sys.executable, "-m", "bench.floor", str(REGISTRY), "--matrix", str(matrix)]
    spent(floor_command)
    pairs: list[tuple[Spent, Spent]] = []
    for k in range(PAIRS):
        if k % 2:
            floor = spent(floor_command)
            pairs.append((spent(audit), floor))
        else:
            pairs.append((spent(audit), spent(floor_command)))
    found = json.loads((work / "overhead" / "matrix.json").read_text())
    cells = [c for e in found["entries"] for c in e["cells"]]
    floor_checks = floor_per_check(pairs[-1][1].stdout)
    return {"pairs": [(a.wall, a.cpu, f.wall, f.cpu) for a, f in pairs], "floor_line": pairs[-1][1].stdout.strip(),
            "by_check": [(name, sum(c["seconds"] for c in cells if c["check"] == name), floor_checks.get(name, 0.0))
                         for name in OVERHEAD_CHECKS],
            "cells": sum(c["seconds"] for c in cells), "last_wall": pairs[-1][0].wall,
            "floor_inside": sum(floor_checks.values()), "floor_wall": pairs[-1][1].wall,
            "hypothesis": hypothesis_alone(found)}


def hypothesis_alone(matrix: dict) -> tuple[float, int]:
    """Seconds Hypothesis takes to draw the run's cases with nothing run on them (each cell's drawn examples, with
    its strategy and seed, then its special points), in this process, and how many cases: the share of both sides
    that is drawing."""
    import time

    from audit.checks import builtin
    from audit.engine.explore import explore
    from audit.inputs.special import special_for
    from audit.inputs.strategies import for_check
    from audit.registry.load import parse_registry
    from audit.runtime.options import cell_seed

    entries = {e.name: e for e in parse_registry(REGISTRY.read_bytes(), str(REGISTRY)).entries}
    table = builtin()
    start, count = time.perf_counter(), 0
    for row in matrix["entries"]:
        entry = entries[row["name"]]
        for cell in row["cells"]:
            check = table[cell["check"]]
            special = special_for(entry, check) if (cell.get("metrics") or {}).get("special_points") else ()
            seed = cell_seed(0, entry.registered_name, cell["check"], cell["dtype"], cell["device"])
            found = explore(lambda case: None, for_check(entry, check), examples=cell["examples"], seed_value=seed,
                            shrink=False, special=special)
            count += found.examples + found.special
    return time.perf_counter() - start, count


def floor_per_check(output: str) -> dict[str, float]:
    """The floor's seconds per check, from its last line (``... per check: gradcheck 3.20 s, ...``)."""
    listed = output.strip().splitlines()[-1].split("per check: ", 1)[1]
    return {name: float(seconds.removesuffix(" s")) for name, seconds in
            (item.split(" ", 1) for item in listed.split(", "))}


def ratios(found: dict) -> tuple[float, float]:
    """The medians of the pairs' wall-clock and CPU ratios (audit over floor)."""
    return (statistics.median(aw / fw for aw, _, fw, _ in found["pairs"]),
            statistics.median(ac / fc for _, ac, _, fc in found["pairs"]))


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    wall, cpu = ratios(found)
    median = {name: statistics.median(p[i] for p in found["pairs"])
              for i, name in enumerate(("audit wall", "audit cpu", "floor wall", "floor cpu"))}
    engine = found["last_wall"] - found["cells"]
    lines = [
        f"`audit run -j 1 --no-cache` with {', '.join(OVERHEAD_CHECKS)}, against the floor (`bench/floor.py`: what a "
        "user would write by hand to verify the same claims, in one process: on every cell of the audit's matrix the "
        "same cases, drawn and special points, and the same comparisons, in plain torch; "
        "`tests/bench/test_floor.py` keeps the two in step); "
        f"{len(found['pairs'])} pairs after a warm-up, the order alternating; medians.", "",
        "| | audit | floor | **ratio** (median of pairs; target ≤ 1.0) |", "|---|---|---|---|",
        f"| wall-clock (s) | {median['audit wall']:.1f} | {median['floor wall']:.1f} | **{wall:.2f}** |",
        f"| CPU, user and system (s) | {median['audit cpu']:.1f} | {median['floor cpu']:.1f} | **{cpu:.2f}** |", "",
        "| pair | audit wall (s) | floor wall (s) | wall ratio | audit CPU (s) | floor CPU (s) | CPU ratio |",
        "|---|---|---|---|---|---|---|",
        *[f"| {k + 1} | {aw:.1f} | {fw:.1f} | {aw / fw:.2f} | {ac:.1f} | {fc:.1f} | {ac / fc:.2f} |"
          for k, (aw, ac, fw, fc) in enumerate(found["pairs"])], "",
        "The last pair, inside the cells (the audit's cell seconds from its matrix, the floor's per check):", "",
        "| check | audit, inside its cells (s) | floor (s) |", "|---|---|---|",
        *[f"| {name} | {mine:.1f} | {bare:.1f} |" for name, mine, bare in found["by_check"]],
        f"| outside the cells (the audit: start-up, workers, imports, scheduling, reports; the floor: imports, "
        f"reading the registry) | {engine:.1f} | {found['floor_wall'] - found['floor_inside']:.1f} |", "",
        f"Of both sides' cells, Hypothesis drawing the same {found['hypothesis'][1]} cases with nothing run on them: "
        f"{found['hypothesis'][0]:.1f} s (in the benchmark's own process). The floor's own account of the last "
        f"pair's run: `{found['floor_line']}`", "",
    ]
    return lines


if __name__ == "__main__":
    print_section(measure, render, "overhead")

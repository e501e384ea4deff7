"""Every benchmark of the audit, one command: ``python -m bench.run`` (from the repository root).

Writes ``bench/results.md``: the machine, the versions, the command, and a table per benchmark. Timings
are wall-clock medians of alternated runs on this machine; nothing here is a test and nothing fails on
time. Set BENCH_ROUNDS (default 2) for more rounds.
"""

from __future__ import annotations

import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import special

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "bench" / "registry.yaml"
AUDIT = [sys.executable, "-c", "from audit.cli import main; main()"]
OVERHEAD_CHECKS = ["gradcheck", "gradgradcheck", "opcheck", "vmap", "compile"]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "2"))


def timed(command: list[str], **kwargs) -> float:
    """Seconds one command took (its output discarded; a failure is reported, not hidden)."""
    start = time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, **kwargs)
    seconds = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds


def audit_run(registry: Path, out: Path, *extra: str) -> list[str]:
    return AUDIT + ["run", "--registry", str(registry), "--out", str(out), "--progress", "off", *extra]


def overhead(work: Path) -> dict:
    checks = [arg for name in OVERHEAD_CHECKS for arg in ("--check", name)]
    audit_times, floor_times, floor_checks = [], [], {}
    for _ in range(ROUNDS):
        audit_times.append(timed(audit_run(REGISTRY, work / "overhead", *checks, "-j", "1")))
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "bench.floor", str(REGISTRY)], cwd=ROOT, capture_output=True,
                              text=True, check=True)
        floor_times.append(time.perf_counter() - start)
        floor_checks = floor_per_check(done.stdout)
    matrix = json.loads((work / "overhead" / "matrix.json").read_text())
    cells = sum(c["seconds"] for e in matrix["entries"] for c in e["cells"])
    in_cells = {name: sum(c["seconds"] for e in matrix["entries"] for c in e["cells"] if c["check"] == name)
                for name in OVERHEAD_CHECKS}
    audit, floor = statistics.median(audit_times), statistics.median(floor_times)
    return {"audit": audit, "floor": floor, "ratio": audit / floor, "cells": cells, "engine": audit - cells,
            "by_check": [(name, in_cells[name], floor_checks.get(name, float("nan"))) for name in OVERHEAD_CHECKS]}


def floor_per_check(output: str) -> dict[str, float]:
    """The floor's seconds per check, from its last line (``... per check: gradcheck 3.20 s, ...``)."""
    listed = output.strip().splitlines()[-1].split("per check: ", 1)[1]
    return {name: float(seconds.removesuffix(" s")) for name, seconds in
            (item.split(" ", 1) for item in listed.split(", "))}


def scaling(work: Path) -> dict:
    one, two = [], []
    for _ in range(ROUNDS):
        one.append(timed(audit_run(REGISTRY, work / "j1", "-j", "1")))
        two.append(timed(audit_run(REGISTRY, work / "j2", "-j", "2")))
    matrix = json.loads((work / "j1" / "matrix.json").read_text())
    return {"j1": statistics.median(one), "j2": statistics.median(two), "speedup": statistics.median(one) /
            statistics.median(two), "matrix": matrix}


def premerge(work: Path) -> dict:
    """A copy of the benchmark registry whose own targets module can be edited like a pull request would."""
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


def scale(work: Path) -> dict:
    import yaml

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
    return {"validate": validate, "list": listing, "shard_split": planning}


def worker_memory(work: Path) -> float:
    """Peak RSS (MiB) of the largest process of a one-entry gradcheck run: the worker."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run(audit_run(REGISTRY, work / "memory", "--select", "power3", "--check", "gradcheck"), cwd=ROOT,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss) / 1024


def unclaimed_share(matrix: dict) -> dict:
    """How much of a default run's cell time goes to unclaimed probes (a float16/bfloat16 dtype probe, a
    property the entry does not claim), overall and per check, skips included (a skip costs little)."""
    total, unclaimed, by_check = 0.0, 0.0, {}
    for entry in matrix["entries"]:
        for cell in entry["cells"]:
            total += cell["seconds"]
            if not cell.get("claimed", True):
                unclaimed += cell["seconds"]
                by_check[cell["check"]] = by_check.get(cell["check"], 0.0) + cell["seconds"]
    return {"total": total, "unclaimed": unclaimed, "share": unclaimed / total if total else 0.0,
            "by_check": sorted(by_check.items(), key=lambda item: -item[1])}


def per_check(matrix: dict) -> list[tuple[str, int, float]]:
    totals: dict[str, list[float]] = {}
    for entry in matrix["entries"]:
        for cell in entry["cells"]:
            if cell["status"] != "skip":
                totals.setdefault(cell["check"], []).append(cell["seconds"])
    return sorted(((name, len(v), sum(v) / len(v)) for name, v in totals.items()), key=lambda row: -row[2])


def render(results: dict, started: float) -> str:
    import torch

    o, s, p, c = results["overhead"], results["scaling"], results["premerge"], results["scale"]
    lines = [
        "# Benchmarks", "",
        f"Command: `python -m bench.run` (from the repository root), {ROUNDS} alternated rounds, medians; "
        f"{time.perf_counter() - started:.0f} s in all.", "",
        f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"torch {torch.__version__}; benchmark registry: `bench/registry.yaml` (21 entries: functions, a callable, "
        "ops, a module).", "",
        "## 1. Overhead against the bare checks", "",
        "| | seconds |", "|---|---|",
        f"| `audit run -j 1` with {', '.join(OVERHEAD_CHECKS)} | {o['audit']:.1f} |",
        "| the floor (`bench/floor.py`: the same torch checks on the same example counts, one process) | "
        f"{o['floor']:.1f} |",
        f"| **ratio** (target ≤ 1.10) | **{o['ratio']:.2f}** |",
        f"| of the audit's time: inside cells (the checks themselves) | {o['cells']:.1f} |",
        f"| of the audit's time: the engine (imports, workers, scheduling, reports) | {o['engine']:.1f} |", "",
        "| check | audit, inside its cells (s) | floor (s) |", "|---|---|---|",
        *[f"| {name} | {mine:.1f} | {bare:.1f} |" for name, mine, bare in o["by_check"]], "",
        "## 2. Parallel scaling (every check)", "",
        "| | seconds |", "|---|---|",
        f"| `-j 1` | {s['j1']:.1f} |", f"| `-j 2` | {s['j2']:.1f} |",
        f"| **speed-up** (target ≥ 1.80) | **{s['speedup']:.2f}** |", "",
        "## 3. Pre-merge cost (`--profile premerge`, the result cache)", "",
        "| | seconds |", "|---|---|",
        f"| cold (empty cache) | {p['cold']:.1f} |",
        f"| warm, nothing changed | {p['warm']:.2f} |",
        f"| one targets file changed (the 6 Power entries and ScaleRows re-audit) | {p['changed']:.1f} |",
        f"| `python -c \"import torch\"` | {p['torch']:.2f} |",
        f"| `python -c pass` | {p['python']:.2f} |",
        f"| **warm / import torch** (target ≤ 1.10) | **{p['ratio']:.2f}** |", "",
        "## 4. Per-check cost (mean seconds per cell, `-j 1` run, skips left out)", "",
        "| check | cells | mean s |", "|---|---|---|",
    ]
    lines += [f"| {name} | {count} | {mean:.3f} |" for name, count, mean in per_check(s["matrix"])]
    lines += [
        "", "## 5. Scale (a generated registry of 1,000 entries)", "",
        "| | seconds |", "|---|---|",
        f"| `audit validate` (target < 1) | {c['validate']:.2f} |",
        f"| `audit list` (target < 0.5) | {c['list']:.2f} |",
        f"| shard planning (`split` of 1,000 entries into 8, by durations) | {c['shard_split']:.3f} |",
        f"| peak memory of a worker (one gradcheck cell on default sizes), MiB | {results['memory']:.0f} |", "",
    ]
    u = unclaimed_share(s["matrix"])
    lines += [
        "## 6. Unclaimed probes (the `-j 1` every-check run)", "",
        "What the probes cost: cells of a property or dtype the entry does not claim, which never gate but say what",
        "could be claimed (`xpass`) or is not supported (`unsupported`).", "",
        "| | seconds |", "|---|---|",
        f"| every cell | {u['total']:.1f} |",
        f"| unclaimed cells | {u['unclaimed']:.1f} |",
        f"| **unclaimed share** (target ≤ 25%) | **{100 * u['share']:.0f}%** |", "",
        "| check (unclaimed cells only) | seconds |", "|---|---|",
    ]
    lines += [f"| {name} | {seconds:.1f} |" for name, seconds in u["by_check"]]
    lines += ["", *special.render(results["special"])]
    return "\n".join(lines) + "\n"


def main() -> int:
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as folder:
        work = Path(folder)
        results = {"overhead": overhead(work), "scaling": scaling(work), "premerge": premerge(work),
                   "scale": scale(work), "memory": worker_memory(work), "special": special.measure()}
        text = render(results, started)
    (ROOT / "bench" / "results.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())

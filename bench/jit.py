"""JIT caches per worker slot: two workers compiling the same kernel into a cache their library neither locks nor
writes atomically never see each other's half-written file, and a second run compiles nothing.

Two entries whose module JIT-compiles the same kernel (``tests/fixtures/jit_cache.py``: 3 s a compile, under
``$XDG_CACHE_HOME``), ``--check forward --check gradcheck -j 2``, three runs into one fresh audit cache folder (the
slots' folders, :mod:`audit.runtime.jit`): each run's seconds, the compiles it made (the fixture logs each) and its
cells in error. Run: ``python -m bench.jit`` (prints the section).
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from bench.timing import ENV, audit_run, spent, print_section

ENTRIES = [{"name": name, "target": f"tests.fixtures.jit_cache:{name}", "inputs": [{"shape": ["N"]}],
            "dims": {"N": [1, 4]}} for name in ("Scale", "ScaleAgain")]
DEFAULTS = {"owner": "@bench", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}}
RUNS = 3


def measure(work: Path) -> dict:
    """(seconds, compiles, cells in error) of each run."""
    registry = work / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": DEFAULTS, "entries": ENTRIES}, sort_keys=False))
    home, log = work / "home", work / "compiles.log"
    home.mkdir()
    env = {**{k: v for k, v in ENV.items() if k != "XDG_CACHE_HOME"}, "HOME": str(home), "TOYJIT_LOG": str(log)}
    runs = []
    for _ in range(RUNS):
        before = _compiles(log)
        found = spent(audit_run(registry, work / "out", "--check", "forward", "--check", "gradcheck", "--no-cache",
                                "-j", "2"), env=env)
        matrix = json.loads((work / "out" / "matrix.json").read_text())
        errors = sum(c["status"] == "error" for e in matrix["entries"] for c in e["cells"])
        runs.append((found.wall, _compiles(log) - before, errors))
    return {"runs": runs}


def _compiles(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    names = ("first run (cold)", "second run", "third run")
    return ["Two entries whose module JIT-compiles the same kernel into a cache that neither locks nor writes "
            "atomically (`tests/fixtures/jit_cache.py`: 3 s a compile, under `$XDG_CACHE_HOME`), `-j 2`, forward and "
            "gradcheck, three runs into one fresh audit cache folder. Each worker slot has its own JIT folders "
            "(`audit/runtime/jit.py`), kept between runs: one compile per slot on a cold cache, none after, and no "
            "worker reads another's half-written file.", "",
            "| run | seconds | compiles | cells in error |", "|---|---|---|---|",
            *[f"| {name} | {seconds:.2f} | {compiles} | {errors} |"
              for name, (seconds, compiles, errors) in zip(names, found["runs"])], ""]


if __name__ == "__main__":
    print_section(measure, render, "jit")

"""Half precision judged by the precision's own error: what its cells cost, the error ratios correct entries record,
and which cells fail.

The benchmark registry's four entries with a reference (logsumexp, softmax, sincos, softplus) with float16 and
bfloat16 claimed beside float64 and float32 (so each half cell runs the claimed examples and shrinks a failure),
``--check dtype --check forward --no-cache -j 1``, :data:`ROUNDS` runs: the half cells' seconds (each run's sum, and
the median), the ratios of each entry's error to the reference's own in that dtype (``metrics.error_ratio``), and
every failing cell. Run: ``python -m bench.half`` (prints the section).
"""

from __future__ import annotations

import json
import os
import statistics
from pathlib import Path

import yaml

from bench.timing import REGISTRY, audit_run, spent, print_section

ENTRIES = ("logsumexp", "softmax", "sincos", "softplus")
HALF = ("float16", "bfloat16")
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def registry(work: Path) -> Path:
    """The four entries, half precision claimed, in a registry of their own under ``work``."""
    document = yaml.safe_load(REGISTRY.read_text())
    entries = [{**e, "supports": {**e.get("supports", {}), "dtypes": ["float64", "float32", *HALF]}}
               for e in document["entries"] if e["name"] in ENTRIES]
    path = work / "half.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "defaults": document["defaults"], "entries": entries},
                                   sort_keys=False))
    return path


def measure(work: Path) -> dict:
    """Each round's half cells' seconds; the last round's error ratios and failing cells."""
    path, rounds = registry(work), []
    for _ in range(ROUNDS):
        spent(audit_run(path, work / "out", "--check", "dtype", "--check", "forward", "--no-cache", "-j", "1"))
        matrix = json.loads((work / "out" / "matrix.json").read_text())
        cells = [(e["name"], c) for e in matrix["entries"] for c in e["cells"] if c["dtype"] in HALF]
        rounds.append(sum(c["seconds"] for _, c in cells))
    ratios = [value for _, c in cells if c["status"] == "pass"
              for value in (c.get("metrics") or {}).get("error_ratio", {}).values()]
    failing = [f"`{name}` {c['check']} in {c['dtype']}: {c['message'][:200]}" for name, c in cells
               if c["status"] == "fail"]
    return {"rounds": rounds, "cells": len(cells), "ratios": ratios, "failing": failing}


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    ratios = found["ratios"]
    spread = f"{min(ratios):.2f} to {max(ratios):.2f}" if ratios else "none recorded"
    return ["The benchmark registry's four entries with a reference (logsumexp, softmax, sincos, softplus), float16 "
            "and bfloat16 claimed, `--check dtype --check forward --no-cache -j 1`. A half cell compares the target "
            "with the reference's float64 result, allowing a multiple of the error the reference itself makes in "
            "that dtype: no finite differences in half precision.", "",
            "| | |", "|---|---|",
            f"| half cells | {found['cells']} |",
            f"| their seconds, each round | {', '.join(f'{s:.2f}' for s in found['rounds'])} |",
            f"| **their seconds** (median) | **{statistics.median(found['rounds']):.2f}** |",
            f"| error over the reference's own in the dtype (`metrics.error_ratio`), passing cells | {spread} |", "",
            "Failing cells (a claimed half dtype the entry's arithmetic does not meet):", "",
            *([f"- {line}" for line in found["failing"]] or ["- none"]), ""]


if __name__ == "__main__":
    print_section(measure, render, "half")

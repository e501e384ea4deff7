"""What special points cost: the gradient checks' structured cases (audit/inputs/special.py) on the benchmark registry.

``python -m bench.special`` (from the repository root) prints its section of ``bench/results.md``; ``bench.run``
includes it. Every cell runs in this process, claimed, with the default examples and seed, and is timed in CPU
seconds (``time.process_time``), which a busy machine disturbs less than wall-clock time: the cells of the checks
that try special points (gradcheck, gradgradcheck, forward_ad), with and without them, in alternated rounds
(medians), and every check's cells once, for the share.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))


def _cells_seconds(registry, targets, checks: dict, options) -> tuple[float, int]:
    from audit.engine.cell import run_cell
    from audit.engine.plan import plan

    seconds, examples = 0.0, 0
    for entry in registry.entries:
        for key in plan(entry, checks):
            start = time.process_time()
            outcome = run_cell(entry, targets[entry.name], checks[key.check], key, options, True)
            examples += outcome.examples + outcome.details.get("special_points", 0)  # drawn, then structured
            seconds += time.process_time() - start
    return seconds, examples


def measure(work: Path | None = None) -> dict:
    """CPU seconds of gradcheck's cells with and without special points (medians), their examples, and of every
    check's cells (with them)."""
    from audit.checks import builtin
    from audit.registry.load import load_registry
    from audit.runtime.options import RunOptions
    from audit.runtime.target import resolve

    registry = load_registry(ROOT / "bench" / "registry.yaml")
    targets = {e.name: resolve(e, ROOT) for e in registry.entries}
    options = RunOptions(seed=0, base=str(ROOT))
    checks = builtin()
    runs = {True: [], False: []}
    examples = {}
    searching = [name for name, check in checks.items() if check.special]
    for _ in range(ROUNDS):
        for on in (True, False):
            chosen = {name: replace(checks[name], special=on) for name in searching}
            seconds, examples[on] = _cells_seconds(registry, targets, chosen, options)
            runs[on].append(seconds)
    every, _ = _cells_seconds(registry, targets, checks, options)
    on, off = statistics.median(runs[True]), statistics.median(runs[False])
    return {"on": on, "off": off, "examples_on": examples[True], "examples_off": examples[False], "every": every,
            "rounds": runs, "checks": searching}


def render(m: dict) -> list[str]:
    """The section's body, as lines."""
    extra = m["on"] - m["off"]
    return [
        f"`python -m bench.special`: {ROUNDS} alternated rounds, medians (the cells of {', '.join(m['checks'])}; "
        "rounds with: "
        f"{', '.join(f'{x:.2f}' for x in m['rounds'][True])}; "
        f"without: {', '.join(f'{x:.2f}' for x in m['rounds'][False])}).",
        "",
        "| | seconds |", "|---|---|",
        f"| their cells, with special points ({m['examples_on']} examples) | {m['on']:.2f} |",
        f"| their cells, without ({m['examples_off']} examples) | {m['off']:.2f} |",
        f"| every check's cells (a default run, special points included) | {m['every']:.1f} |",
        f"| **special points' share of a default run** (target ≤ 10%) | **{100 * extra / m['every']:.1f}%** |", "",
    ]


if __name__ == "__main__":
    sys.stdout.write("\n".join(render(measure())) + "\n")

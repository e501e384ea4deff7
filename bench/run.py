"""Every benchmark of the audit, one command: ``python -m bench.run`` (from the repository root, about 50 minutes).

Writes ``bench/results.md``: the machine, then one section per benchmark (:data:`SECTIONS`), each saying when it was
measured, at which commit and in how long. ``--only KEY`` (repeatable) measures those sections again and keeps the
others as the file has them; ``--list`` names the keys. Timings are medians of alternated runs on this machine;
nothing here is a test and nothing fails on time. ``BENCH_ROUNDS`` sets the rounds of most sections (default 3),
``BENCH_PAIRS`` the overhead's pairs (default 7).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import (costs, firstrun, half, health, jit, mutation, overhead, premerge, record, scale, scaling, schedule,
                   special, warm)
from bench.timing import ROOT

RESULTS = ROOT / "bench" / "results.md"


@dataclass(frozen=True)
class Section:
    """One section of the results: its key (``--only``), heading, the measurement it reads (shared by sections that
    read one run) and how its body is written from it."""

    key: str
    title: str
    measurement: str
    render: Callable[[dict], list[str]]


#: Each measurement by name: ``measure(work folder) -> dict``.
MEASUREMENTS: dict[str, Callable[[Path], dict]] = {
    "overhead": overhead.measure, "scaling": scaling.measure, "premerge": premerge.measure, "scale": scale.measure,
    "health": health.measure, "special": special.measure, "warm": warm.measure, "jit": jit.measure,
    "schedule": schedule.measure, "half": half.measure, "mutation": mutation.measure, "costs": costs.measure,
    "record": record.measure, "firstrun": firstrun.measure_both,
}

SECTIONS = (
    Section("overhead", "Overhead against the bare checks (paired)", "overhead", overhead.render),
    Section("scaling", "Parallel scaling (every check)", "scaling", scaling.render_scaling),
    Section("premerge", "Pre-merge cost (`--profile premerge`, the result cache)", "premerge", premerge.render),
    Section("per-check", "Per-check cost (mean seconds per cell, `-j 1` run, skips left out)", "scaling",
            scaling.render_per_check),
    Section("scale", "Scale (a generated registry of 1,000 entries)", "scale", scale.render),
    Section("unclaimed", "Unclaimed probes (the `-j 1` every-check run)", "scaling", scaling.render_unclaimed),
    Section("health", "Worker health (`python -m bench.health`)", "health", health.render),
    Section("special", "Special points (the gradient checks' structured cases, CPU seconds in this process)",
            "special", special.render),
    Section("warm", "Warm pre-merge against `import torch`, paired (`python -m bench.warm`)", "warm", warm.render),
    Section("jit", "JIT caches per worker slot (`python -m bench.jit`)", "jit", jit.render),
    Section("schedule", "Schedule independence (`python -m bench.schedule`)", "schedule", schedule.render),
    Section("half", "Half precision judged by the precision's own error (`python -m bench.half`)", "half", half.render),
    Section("mutation", "Mutation testing (`python -m bench.mutation`, -j 2)", "mutation", mutation.render),
    Section("costs", "Where the audit's time goes (`python -m bench.costs`, cProfile)", "costs", costs.render),
    Section("record", "The cost of a behaviour record (`python -m bench.record`)", "record", record.render),
    Section("firstrun", "A fresh clone's first run, before and after (`python -m bench.firstrun`)", "firstrun",
            firstrun.render_both),
)

#: The line before each section in the file, by which ``--only`` finds what to keep.
MARK = "<!-- bench section: {key} -->"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=[s.key for s in SECTIONS], help="measure this section")
    parser.add_argument("--list", action="store_true", help="name each section's key and stop")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(f"{s.key}: {s.title}" for s in SECTIONS))
        return 0
    chosen = [s for s in SECTIONS if not args.only or s.key in args.only]
    kept = kept_sections(RESULTS.read_text() if RESULTS.exists() else "")
    missing = [s.key for s in SECTIONS if s not in chosen and s.key not in kept]
    if missing:
        raise SystemExit(f"bench/results.md has no section {', '.join(missing)} to keep: measure it too (--only) or "
                         "run every section")
    bodies = {**kept, **measured(chosen)}
    RESULTS.write_text(document(bodies))
    print(f"wrote {RESULTS}: {', '.join(s.key for s in chosen)} measured")
    return 0


def measured(sections: list[Section]) -> dict[str, str]:
    """Each section's text: its measurement made once (sections reading one run share it), then rendered, headed by
    when, at which commit and in how long it was measured."""
    found: dict[str, tuple[dict, float]] = {}
    texts = {}
    with tempfile.TemporaryDirectory(prefix="audit-bench-") as folder:
        for section in sections:
            name = section.measurement
            if name not in found:
                work = Path(folder) / name
                work.mkdir()
                start = time.perf_counter()
                result = MEASUREMENTS[name](work)
                found[name] = (result, time.perf_counter() - start)
                print(f"{name}: {found[name][1]:.0f} s", file=sys.stderr)
            result, seconds = found[name]
            stamp = (f"Measured {time.strftime('%Y-%m-%d')} at {commit()} (`python -m bench.run --only {section.key}`; "
                     f"its measurement took {seconds:.0f} s).")
            texts[section.key] = "\n".join([stamp, "", *section.render(result)]).rstrip() + "\n"
    return texts


def kept_sections(text: str) -> dict[str, str]:
    """The body of each marked section of ``text`` (below its heading), by key."""
    parts = re.split(r"^<!-- bench section: ([\w-]+) -->\n## [^\n]*\n\n", text, flags=re.MULTILINE)
    return {key: body.rstrip() + "\n" for key, body in zip(parts[1::2], parts[2::2])}


def document(bodies: dict[str, str]) -> str:
    """The whole file: the machine, then every section in order, numbered."""
    import torch

    lines = ["# Benchmarks", "",
             "Command: `python -m bench.run` (from the repository root) measures every section; `python -m bench.run "
             "--only KEY` measures one again and keeps the others. Each section says when it was measured. Commands "
             "run as Python runs by default, writing and reusing bytecode.", "",
             f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
             f"torch {torch.__version__}; benchmark registry: `bench/registry.yaml` (21 entries: functions, a "
             "callable, ops, a module). Decisions measured once against earlier code, which no later run can "
             "repeat, are in `bench/history.md`.", ""]
    for number, section in enumerate(SECTIONS, 1):
        lines += [MARK.format(key=section.key), f"## {number}. {section.title}", "", bodies[section.key]]
    return "\n".join(lines).rstrip() + "\n"


def commit() -> str:
    """The checkout's commit, short, with ``+`` when the working tree differs from it."""
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True)
    return (head.stdout.strip() or "unknown") + ("+" if dirty.stdout.strip() else "")


if __name__ == "__main__":
    sys.exit(main())

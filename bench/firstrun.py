"""A new user's first ``audit run`` of this repository's registry on a fresh clone (``-j 2``), and where its time goes.

A CI job on a fresh machine is always a first run: no result cache, no native build, no bytecode of the audit's own
sources. The clone is made from a revision of this repository (``--rev``, default HEAD) into a temporary folder; the
run is ``audit run -j 2`` there, as the README's first command runs it, with ``AUDIT_TIMELINE`` set
(:mod:`audit.engine.timeline`), and each worker slot's share of the wall time is split into phases:

- before the engine: the command's process start, imports, the registry loaded (until the engine begins);
- worker start: the worker process importing torch and starting its resources (the distributed check's ranks);
- waiting for work: a ready worker with nothing assigned yet (the parent still planning);
- loading targets: importing an entry's code, native sources built or waited for;
- cells: the cells' own time, as the parent saw it (the matrix's seconds are the part inside the check);
- between cells: a worker's time between one cell's end and the next's start, and the parent's judging;
- idle at the end: no part left for this worker while another finishes;
- after the workers: the matrix and reports written, the process's exit.

The target is the wall time within 1.5x of the cells' work (the matrix's seconds) divided by ``-j``.
A revision without the timeline is measured for its wall time alone. Nothing here asserts on time.
Run: ``python -m bench.firstrun [--rev REV]`` (prints the table).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from bench.timing import AUDIT, ENV, ROOT

JOBS = 2
#: The revision before the first-run work: the timeline and this benchmark only (native builds held up a worker).
BEFORE = "38a7fba"
#: What the issue asks of a first run: its wall time within this factor of its cells' work over ``-j``.
TARGET = 1.5
PHASES = ("before the engine", "worker start", "waiting for work", "loading targets", "cells", "between cells",
          "idle at the end", "after the workers")


def measure(work: Path, rev: str = "HEAD") -> dict:
    """Clone ``rev`` into ``work``, run its first ``audit run -j 2`` there; the wall time, the cells' work and (with a
    timeline) each slot's phases."""
    clone = work / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "-q", rev], check=True)
    timeline = work / "timeline.jsonl"
    env = {**ENV, "AUDIT_TIMELINE": str(timeline), "PYTHONPATH": str(clone)}
    first = _run(clone, env)
    events = [json.loads(line) for line in timeline.read_text().splitlines()] if timeline.exists() else []
    second = _run(clone, {**env, "AUDIT_TIMELINE": ""})  # the same clone again: built, bytecode written
    commit = subprocess.run(["git", "-C", str(clone), "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    return {"rev": commit, "wall": first["wall"], "cells": first["cells"], "second": second,
            "phases": phases(events, first["start"], first["end"]) if events else {}}


def _run(clone: Path, env: dict[str, str]) -> dict:
    """``audit run -j 2`` in ``clone``: its start and end (the wall clock), wall time and the cells' work."""
    start = time.time()
    done = subprocess.run(AUDIT + ["run", "-j", str(JOBS), "--progress", "off"], cwd=clone, env=env,
                          capture_output=True, text=True)
    end = time.time()
    if done.returncode not in (0, 1):
        raise SystemExit(f"audit run failed ({done.returncode}): {done.stderr[-2000:]}")
    matrix = json.loads((clone / "reports" / "matrix.json").read_text())
    return {"start": start, "end": end, "wall": end - start,
            "cells": sum(cell["seconds"] for entry in matrix["entries"] for cell in entry["cells"])}


def phases(events: list[dict], start: float, end: float) -> dict[int, dict[str, float]]:
    """Each worker slot's wall time from ``start`` to ``end``, split into :data:`PHASES`."""
    begin = next(e["t"] for e in events if e["what"] == "begin")
    workers_done = next((e["t"] for e in events if e["what"] == "workers_done"), end)
    found: dict[int, dict[str, float]] = defaultdict(lambda: dict.fromkeys(PHASES, 0.0))
    by_slot: dict[int, list[dict]] = defaultdict(list)
    for event in events:
        if event["slot"] is not None:
            by_slot[event["slot"]].append(event)
    for slot, own in by_slot.items():
        spent = found[slot]
        spent["before the engine"] = begin - start
        spent["after the workers"] = end - workers_done
        spawned = own[0]["t"]
        spent["worker start"] += spawned - begin  # the parent planning before this worker was started
        state, since, ready, assigned = "worker start", spawned, False, False
        for event in own[1:]:
            spent[state] += event["t"] - since
            since, what = event["t"], event["what"]
            ready = (ready or what == "ready") and what != "spawn"  # a replaced worker starts again
            assigned = (assigned or what == "assign") and what != "job_end"
            state = _phase(what, state, ready, assigned)
        spent["idle at the end"] += workers_done - since
    return dict(found)


def _phase(what: str, state: str, ready: bool, assigned: bool) -> str:
    """The phase a slot is in after the event ``what``."""
    if not ready:
        return "worker start"
    if what in ("ready", "assign"):
        return "loading targets" if assigned else "waiting for work"
    return {"loaded": "between cells", "cell": "cells", "cell_end": "between cells",
            "job_end": "waiting for work"}.get(what, state)


def render(found: dict) -> list[str]:
    """The table: the wall time against its target, and each slot's phases."""
    target = TARGET * found["cells"] / JOBS
    lines = [f"At {found['rev']}: wall **{found['wall']:.1f} s**; the cells' work {found['cells']:.1f} s over "
             f"`-j {JOBS}` is {found['cells'] / JOBS:.1f} s; target ≤ {TARGET}x that, {target:.1f} s: "
             f"**{found['wall'] / (found['cells'] / JOBS):.2f}x**. The second run in the same clone (built, "
             f"bytecode written, no result cache): wall {found['second']['wall']:.1f} s, cells' work "
             f"{found['second']['cells']:.1f} s.", ""]
    if not found["phases"]:
        return lines + ["(this revision writes no timeline: its phases are not known)", ""]
    table = found["phases"]
    slots = sorted(table)
    lines += [f"| phase | {' | '.join(f'worker {s} (s)' for s in slots)} |", "|---|" + "---|" * len(slots)]
    lines += [f"| {phase} | {' | '.join(f'{table[s][phase]:.1f}' for s in slots)} |" for phase in PHASES]
    lines += [f"| **total** | {' | '.join(f'{sum(table[s].values()):.1f}' for s in slots)} |", ""]
    return lines


def measure_both(work: Path) -> dict:
    """:func:`measure` of :data:`BEFORE`, then of HEAD, each in its own fresh clone (``python -m bench.run --only
    firstrun``)."""
    (work / "before").mkdir()
    (work / "after").mkdir()
    return {"before": measure(work / "before", BEFORE), "after": measure(work / "after", "HEAD")}


def render_both(found: dict) -> list[str]:
    """Before against after: the wall time against its target, then each revision's phases."""
    before, after = found["before"], found["after"]

    def row(name: str, value) -> str:
        return f"| {name} | {value(before)} | {value(after)} |"

    lines = [f"This repository's registry, `audit run -j {JOBS}` in a fresh clone (no result cache, no native build, "
             "no bytecode of the audit's sources: a CI job on a new machine), then again in the same clone. The cells' "
             "work is the matrix's seconds; a first run's cells are slowed by the native build running beside them, "
             "so the second run's cells are given too, the same checking undisturbed.", "",
             f"| | before ({before['rev']}) | after ({after['rev']}) |", "|---|---|---|",
             row("first run, wall (s)", lambda f: f"**{f['wall']:.1f}**"),
             row("its cells' work (s)", lambda f: f"{f['cells']:.1f}"),
             row(f"wall over (cells' work / {JOBS}) (target ≤ {TARGET})",
                 lambda f: f"**{f['wall'] / (f['cells'] / JOBS):.2f}**"),
             row("second run, wall (s)", lambda f: f"{f['second']['wall']:.1f}"),
             row("second run's cells' work (s)", lambda f: f"{f['second']['cells']:.1f}"),
             row(f"first run's wall over (second run's cells' work / {JOBS})",
                 lambda f: f"{f['wall'] / (f['second']['cells'] / JOBS):.2f}"), ""]
    for name, side in (("Before", before), ("After", after)):
        lines += [f"{name}, each worker slot's first-run wall time by phase:", "", *render(side)[2:]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.firstrun", description=__doc__.splitlines()[0])
    parser.add_argument("--rev", default="HEAD", help="the revision to clone (default HEAD)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="audit-bench-firstrun-") as folder:
        print("\n".join(render(measure(Path(folder), args.rev))))


if __name__ == "__main__":
    main()

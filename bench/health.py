"""What keeping workers healthy costs on the bench registry: the checkups between entries and the retirements.

Run from the repository root: ``python -m bench.health [--jobs N]`` (``bench.run`` runs it at ``-j 1``). It runs
``audit run`` once on ``bench/registry.yaml`` (every check, no cache) with ``AUDIT_HEALTH_LOG`` set, so that each worker
appends one line per checkup (:func:`audit.runtime.health.checkup`), and prints a Markdown section for
``bench/results.md``:
the run's seconds, the checkups' seconds and share, how many workers retired and why, and how far a healthy
worker grew (what the bounds in :mod:`audit.runtime.health` are set against).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from audit.runtime import health
from bench.timing import AUDIT, ENV, REGISTRY, spent


def measure(work: Path, jobs: int = 1) -> dict:
    """One run of the bench registry, with its checkups logged."""
    log = work / "health.jsonl"
    started = time.perf_counter()
    spent(AUDIT + ["run", "--registry", str(REGISTRY), "--out", str(work / "health"), "--no-cache", "--progress", "off",
                   "-j", str(jobs)], env={**ENV, "AUDIT_HEALTH_LOG": str(log)})
    seconds = time.perf_counter() - started
    lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {"seconds": seconds, "checkups": lines, "jobs": jobs}


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    lines, jobs = found["checkups"], found["jobs"]
    checking = sum(line["seconds"] for line in lines)
    retired = [line for line in lines if line["retire"]]
    top = {key: max((line[f"grown_{key}"] for line in lines), default=0)
           for key in ("threads", "descriptors", "resident", "address")}
    rows = [
        (f"`audit run -j {jobs}`, every check, no cache (s)", f"{found['seconds']:.1f}"),
        ("checkups between entries", f"{len(lines)}"),
        ("their seconds in all", f"{checking:.3f}"),
        ("**their share of the run** (target ≤ 3%)", f"**{100 * checking / found['seconds']:.2f}%**"),
        ("workers retired (each costs one worker start-up)", f"{len(retired)}"),
        (f"most threads a worker gained (bound {health.MAX_NEW_THREADS})", f"{top['threads']}"),
        (f"most open descriptors gained (bound {health.MAX_NEW_DESCRIPTORS})", f"{top['descriptors']}"),
        (f"most resident memory gained, MiB (bound {health.MAX_NEW_RESIDENT >> 20})", f"{top['resident'] >> 20}"),
        (f"most address space gained, MiB (bound: half of --max-memory, {4 << 10})", f"{top['address'] >> 20}"),
    ]
    why = [f"- after `{line['after']}`: {line['retire']}" for line in retired]
    return (["Each worker checks its own health between entries (`audit/runtime/health.py`); a worker that may be "
             "damaged retires and a fresh one (one worker start-up, about 3-5 s here) takes the next cell. On the "
             "bench registry no worker should retire: the cost is the checkups alone. The growth columns are what the "
             "bounds are set against (each bound is at least 20x the most a healthy worker grew).", "", "| | |",
             "|---|---|"]
            + [f"| {what} | {value} |" for what, value in rows] + [""] + (["Retired:", *why, ""] if why else []))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="audit-bench-health-") as folder:
        print("\n".join(render(measure(Path(folder), args.jobs))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What keeping workers healthy costs on the bench registry: the checkups between entries and the retirements.

Run from the repository root: ``python -m bench.health [--jobs N]``. It runs ``audit run`` once on
``bench/registry.yaml`` (every check, no cache) with ``AUDIT_HEALTH_LOG`` set, so that each worker appends one
line per checkup (:func:`audit.runtime.health.checkup`), and prints a Markdown section for ``bench/results.md``:
the run's seconds, the checkups' seconds and share, how many workers retired and why, and how far a healthy
worker grew (what the bounds in :mod:`audit.runtime.health` are set against).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from audit.runtime import health

ROOT = Path(__file__).resolve().parent.parent


def measure(jobs: int) -> dict:
    """One run of the bench registry, with its checkups logged."""
    with tempfile.TemporaryDirectory(prefix="audit-bench-health-") as folder:
        log = Path(folder) / "health.jsonl"
        env = {**os.environ, "AUDIT_HEALTH_LOG": str(log)}
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", "bench/registry.yaml", "--out",
                               str(Path(folder) / "out"), "--no-cache", "--progress", "off", "-j", str(jobs)],
                              cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        if done.returncode not in (0, 1):
            raise SystemExit(f"audit run failed ({done.returncode}): {done.stderr[-2000:]}")
        lines = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return {"seconds": seconds, "checkups": lines}


def report(found: dict, jobs: int) -> str:
    """The Markdown section."""
    lines = found["checkups"]
    spent = sum(line["seconds"] for line in lines)
    retired = [line for line in lines if line["retire"]]
    top = {key: max((line[f"grown_{key}"] for line in lines), default=0)
           for key in ("threads", "descriptors", "resident", "address")}
    rows = [
        (f"`audit run -j {jobs}`, every check, no cache (s)", f"{found['seconds']:.1f}"),
        ("checkups between entries", f"{len(lines)}"),
        ("their seconds in all", f"{spent:.3f}"),
        ("**their share of the run** (target ≤ 3%)", f"**{100 * spent / found['seconds']:.2f}%**"),
        ("workers retired (each costs one worker start-up)", f"{len(retired)}"),
        (f"most threads a worker gained (bound {health.MAX_NEW_THREADS})", f"{top['threads']}"),
        (f"most open descriptors gained (bound {health.MAX_NEW_DESCRIPTORS})", f"{top['descriptors']}"),
        (f"most resident memory gained, MiB (bound {health.MAX_NEW_RESIDENT >> 20})", f"{top['resident'] >> 20}"),
        (f"most address space gained, MiB (bound: half of --max-memory, {4 << 10})", f"{top['address'] >> 20}"),
    ]
    table = "\n".join(f"| {what} | {value} |" for what, value in rows)
    why = "".join(f"\n- after `{line['after']}`: {line['retire']}" for line in retired)
    return f"| | |\n|---|---|\n{table}\n" + (f"\nRetired:{why}\n" if why else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args(argv)
    print(report(measure(args.jobs), args.jobs))
    return 0


if __name__ == "__main__":
    sys.exit(main())

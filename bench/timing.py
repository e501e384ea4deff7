"""Running and timing the audit's commands for the benchmarks: wall-clock and CPU seconds of a child process.

Every command runs as Python runs by default, writing and reusing bytecode (:data:`ENV`: this sandbox sets
``PYTHONDONTWRITEBYTECODE``, under which every process compiles the audit's own sources again, 0.1-0.3 s a process;
torch's installed bytecode is not affected). Nothing here asserts on time.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "bench" / "registry.yaml"
AUDIT = [sys.executable, "-c", "from audit.cli import main; main()"]
#: The environment every benchmarked command gets: this one's, bytecode written and reused as Python does by default.
ENV = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


@dataclass(frozen=True)
class Spent:
    """What one command took: wall-clock seconds, and the CPU seconds (user and system) of it and its children."""

    wall: float
    cpu: float
    stdout: str = ""


def spent(command: list[str], *, ok=(0, 1), **kwargs) -> Spent:
    """Run ``command`` (from the repository root unless ``cwd`` says otherwise, in :data:`ENV` unless ``env`` does); a
    return code outside ``ok`` stops the benchmark, with its stderr (a failure is reported, not timed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, **{"cwd": ROOT, "env": ENV, **kwargs})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in ok:
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Spent(wall, cpu, done.stdout)


def timed(command: list[str], **kwargs) -> float:
    """Wall-clock seconds of :func:`spent`."""
    return spent(command, **kwargs).wall


def audit_run(registry: Path, out: Path, *extra: str) -> list[str]:
    """``audit run`` of ``registry`` into ``out``, quiet, with ``extra`` arguments."""
    return AUDIT + ["run", "--registry", str(registry), "--out", str(out), "--progress", "off", *extra]


def print_section(measure, render, name: str) -> None:
    """A measurement run alone (``python -m bench.NAME``): made in a temporary work folder, its section printed."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix=f"audit-bench-{name}-") as folder:
        print("\n".join(render(measure(Path(folder)))))

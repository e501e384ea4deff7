"""SIGTERM (a cancelled CI job) is handled like Ctrl-C: every process ended, nothing written, exit 143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def descendants(pid: int) -> set[int]:
    """Every living process below ``pid``, read from /proc."""
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
        except OSError:
            continue
        if fields.get("State", "").startswith("Z"):
            continue
        children.setdefault(int(fields["PPid"]), []).append(int(fields["Pid"]))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc (Linux)")
def test_sigterm_ends_every_worker_and_writes_nothing(write_registry, tmp_path):
    registry = write_registry([{"name": "hang", "owner": "@t", "target": "tests.fixtures.hostile:Hang",
                                "inputs": [{"shape": ["N"]}]}])
    out = tmp_path / "out"
    process = subprocess.Popen([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out", str(out),
                                "--check", "forward", "--progress", "off", "--timeout", "300"],
                               cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not descendants(process.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(3)  # the worker is inside the hanging forward by now
    workers = descendants(process.pid)
    assert workers, "no worker started"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 143, stderr
    assert "terminated" in stderr and "Traceback" not in stderr
    assert not out.exists() or not any(out.iterdir())
    time.sleep(0.5)
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists() and _alive(pid)]


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "State:\tZ" not in state and os.getpgid(pid) >= 0

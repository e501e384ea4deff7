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


def _strays() -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"audit-stray-marker" in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc (Linux)")
def test_processes_a_target_starts_end_with_its_cell(write_registry, tmp_path):
    registry = write_registry([{"name": "spawner", "owner": "@t", "target": "tests.fixtures.hostile:Spawner",
                                "inputs": [{"shape": ["N"]}], "supports": {"dtypes": ["float64"]}}])
    before = set(_strays())
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out",
                           str(tmp_path / "out"), "--check", "forward", "--check", "gradcheck", "--progress", "off"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    time.sleep(0.5)
    assert set(_strays()) - before == set()

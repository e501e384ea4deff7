"""A run leaves nothing behind in the temporary folder: one root per run, removed whatever ended it.

The workers and ranks write under the run's root (audit/runtime/scratch.py): the Hypothesis home, the distributed
ranks' rendezvous files and logs, a target's own scratch. The tests give the run a private TMPDIR and look at it
after a run with a retired worker, a timed-out cell and distributed cells; after a run ended by SIGTERM in the
middle; and after a run killed with SIGKILL, whose root the next run reclaims.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from audit.runtime import scratch
from tests.conftest import ROOT

DEFAULTS = {"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}}
EXPIT = {"name": "expit", "target": "tests.fixtures.scipy_expit:Expit", "inputs": [{"shape": ["B", "N"]}],
         "dims": {"N": [1, 4], "B": [2, 4]}, "batch": "B"}
HANG = {"name": "hang", "target": "tests.fixtures.hostile:Hang", "inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
INTERRUPTER = {**HANG, "name": "interrupter", "target": "tests.fixtures.damage:Interrupter"}
RUN = ["--check", "forward", "--check", "gradcheck", "--check", "distributed", "--no-cache", "--progress", "off",
       "--examples", "5"]


def _audit(tmp_path: Path, entries: list[dict], *args: str) -> subprocess.Popen:
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": DEFAULTS, "entries": entries}, sort_keys=False))
    temp = tmp_path / "tmp"
    temp.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(temp)}
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)  # the run's own, as a user's
    return subprocess.Popen([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out",
                             str(tmp_path / "out"), *RUN, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _left(tmp_path: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp_path / "tmp")) for p in (tmp_path / "tmp").rglob("*"))


def _wait_for(tmp_path: Path, pattern: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not list((tmp_path / "tmp").glob(pattern)):
        assert time.monotonic() < deadline, f"nothing matched {pattern}: {_left(tmp_path)}"
        time.sleep(0.1)


@pytest.mark.slow
def test_nothing_is_left_after_a_run_with_a_retired_worker_a_timeout_and_ranks_nor_after_sigterm(tmp_path):
    run = _audit(tmp_path, [INTERRUPTER, HANG, EXPIT], "--timeout", "3", "-j", "2")
    output, _ = run.communicate(timeout=600)
    assert run.returncode == 1, output
    assert "timed out after 3 s" in output and "KeyboardInterrupt" in output and "ddp" in output, output
    assert _left(tmp_path) == []
    run = _audit(tmp_path, [EXPIT, HANG], "--timeout", "600", "-j", "1")
    _wait_for(tmp_path, f"{scratch.PREFIX}*/audit-ddp-*/rank1.log")  # the worker started its ranks
    _wait_for(tmp_path, f"{scratch.PREFIX}*/autograd-audit-hypothesis-*")  # and ran a cell
    run.send_signal(signal.SIGTERM)
    output, _ = run.communicate(timeout=60)
    assert run.returncode == 143, output
    assert _left(tmp_path) == []


@pytest.mark.slow
def test_the_root_of_a_run_killed_with_sigkill_is_reclaimed_by_the_next_run(tmp_path):
    run = _audit(tmp_path, [EXPIT, HANG], "--timeout", "600", "-j", "1")
    _wait_for(tmp_path, f"{scratch.PREFIX}*/autograd-audit-hypothesis-*")
    run.kill()
    run.communicate(timeout=60)
    assert [p for p in _left(tmp_path) if p.startswith(scratch.PREFIX)]  # left behind: nobody could remove it
    run = _audit(tmp_path, [EXPIT], "-j", "1")
    output, _ = run.communicate(timeout=600)
    assert run.returncode == 0, output
    assert _left(tmp_path) == []


def _dead_pid() -> int:
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return int(done.stdout)


def test_reclaim_removes_the_roots_whose_owner_is_gone_and_keeps_the_others(tmp_path):
    def root(name: str, marker: str | None) -> Path:
        path = tmp_path / f"{scratch.PREFIX}{name}"
        path.mkdir()
        if marker is not None:
            (path / scratch.MARKER).write_text(marker)
        return path

    dead, mine = _dead_pid(), os.getpid()
    gone = root(f"{dead}-a", f"{dead}")
    reused = root(f"{mine}-b", f"{mine} 1")  # this pid, but a process started at another time: a reused pid
    unmarked = root(f"{dead}-c", None)  # killed before it wrote its marker
    running = root(f"{mine}-d", scratch._identity(mine))
    foreign = root("someone-else", "not a pid")
    removed = scratch.reclaim(str(tmp_path))
    assert sorted(removed) == sorted(str(p) for p in (gone, reused, unmarked))
    assert running.is_dir() and foreign.is_dir()


def test_a_run_root_is_made_with_its_marker_given_to_workers_and_removed(tmp_path, monkeypatch):
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    with scratch.run_root() as root:
        assert Path(root).parent == tmp_path
        assert (Path(root) / scratch.MARKER).read_text() == scratch._identity(os.getpid())
        assert scratch.worker_env({"A": "1"})["TMPDIR"] == root
        with scratch.run_root() as inner:
            assert inner == root
        assert Path(root).is_dir()
    assert not Path(root).exists() and scratch.current() is None
    assert "TMPDIR" not in scratch.worker_env({"A": "1"})

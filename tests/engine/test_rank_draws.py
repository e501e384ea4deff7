"""A stochastic entry's distributed cell is the same on every run, at every ``-j``.

The pair of ranks serves every distributed cell of its worker; each request now starts from the cell's seed
(audit/runtime/ddp_rank.py), as every call in the worker does. Before, the ranks' draws were not fixed by the seed:
examples.dropout's distributed cell (this repository's registry) said "got 5.26" in one run and "got 0, expected
3.02" in the next, at the same ``-j`` (found by bench/schedule.py, as a difference between schedules).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def _cells(out, jobs: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(ROOT / "registry.yaml"), "--out",
                           str(out), "--check", "distributed", "--no-cache", "--progress", "off", "-j", jobs],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode in (0, 1), done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    return {e["name"]: [(c["status"], c["message"]) for c in e["cells"]] for e in matrix["entries"]}


def test_the_distributed_cells_are_the_same_on_every_run_and_schedule(tmp_path):
    runs = [_cells(tmp_path / str(n), jobs) for n, jobs in enumerate(("1", "1", "1", "2"))]
    assert "dropout" in runs[0] and all(run == runs[0] for run in runs[1:])

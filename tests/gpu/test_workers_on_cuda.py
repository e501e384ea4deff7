"""Workers on a GPU: they report the CUDA device, the environment's fingerprint sees the GPU, and the bugs that
damage a process (an illegal memory access, CUDA out of memory) are error cells whose worker is replaced, with the
neighbour after each passing. Marked gpu: a skip, saying why, where no CUDA device is."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.gpu.plants import REGISTRY
from tests.helpers import ROOT

pytestmark = pytest.mark.gpu


def test_a_worker_reports_the_cuda_device():
    from audit.engine.worker import environment

    found = environment()
    assert "cuda" in found["devices"] and found["cuda"], found


def test_the_environment_fingerprint_sees_the_gpu(tmp_path):
    from audit.engine import environment

    seen = environment.fingerprint()
    assert any(seen["drivers"].values()) or seen["nodes"] or any(seen["devices"].values()), seen
    assert "cuda" in environment.known(tmp_path)["devices"]


def test_an_illegal_memory_access_and_cuda_out_of_memory_are_contained(tmp_path):
    """Run in workers, one at a time, each bug before its neighbour: the damaged worker is replaced."""
    names = ["double_triton_far_store", "double_triton", "double_device_sized_workspace", "double_workspace"]
    picks = [arg for name in names for arg in ("--select", name)]
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(REGISTRY), *picks, "--check",
                           "forward", "--device", "cuda", "-j", "1", "--examples", "5", "--out", str(tmp_path / "out"),
                           "--progress", "off", "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert done.returncode == 1, done.stdout + done.stderr
    cells = {e["name"]: e["cells"][0] for e in json.loads((tmp_path / "out" / "matrix.json").read_text())["entries"]}
    lost, exhausted = cells["double_triton_far_store"], cells["double_device_sized_workspace"]
    assert lost["status"] == "error" and "illegal memory access" in lost["message"], lost["message"]
    assert "a worker retires after it" in lost["message"] or "not trusted" in lost["message"], lost["message"]
    assert exhausted["status"] == "error" and "CUDA out of memory" in exhausted["message"], exhausted["message"]
    assert cells["double_triton"]["status"] == "pass", cells["double_triton"]["message"]
    assert cells["double_workspace"]["status"] == "pass", cells["double_workspace"]["message"]

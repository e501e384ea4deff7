"""Triton kernels and replay scripts on a GPU: an entry's Triton kernels run natively in its CUDA cells (no
interpreter), its CPU cells are a skip saying why, and a CUDA cell's replay script fails as the cell did. Marked
gpu: a skip, saying why, where no CUDA device is."""

from __future__ import annotations

import subprocess
import sys

import pytest

from audit.results.outcome import HELD, SKIPPED, VIOLATED
from tests.helpers import ROOT, entry, observe

pytestmark = pytest.mark.gpu

T = "tests.fixtures.triton_kernels"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 8]}, "reference": f"{T}:square_reference",
          "triton": "interpret", "supports": {"devices": ["cpu", "cuda"]}}

# (planted bug, its twin, check) from the CPU suite's Triton fixtures. RowPastTheEnd is left out: on a GPU its
# read past the tensor is a real out-of-bounds access, in this test's own process.
CASES = [("MissingFactor", "Square", "gradcheck"), ("Float32Inside", "Square", "forward"),
         ("Strideless", "Square", "noncontiguous")]


@pytest.mark.parametrize("bug, twin, check", CASES, ids=[c[0] for c in CASES])
def test_a_planted_triton_bug_is_caught_natively_on_cuda_and_its_twin_passes(tmp_path, bug, twin, check):
    found = observe(entry(tmp_path, name=bug.lower(), target=f"{T}:{bug}", **VECTOR), check, device="cuda",
                    examples=8)
    assert found.verdict == VIOLATED, found.message
    assert "triton" not in found.details  # not interpreted
    held = observe(entry(tmp_path, name=twin.lower(), target=f"{T}:{twin}", **VECTOR), check, device="cuda",
                   examples=8)
    assert held.verdict == HELD, held.message


def test_with_cuda_the_cpu_cells_of_a_triton_entry_say_why_they_do_not_run(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:Square", **VECTOR), "gradcheck", device="cpu", examples=3)
    assert found.verdict == SKIPPED and "its Triton kernels run on CUDA here" in found.message, found.message


# (target, check, dtype, registry keys): a CUDA failure of each check whose replay body has a CUDA branch.
REPLAYED = [
    (f"{T}:MissingFactor", "gradcheck", "float64", VECTOR),
    ("bench.gpu.planted:GeluFastOnCuda", "device", "float64", {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 8]},
                                                                "supports": {"devices": ["cuda"]}}),
    ("tests.fixtures.transforms:LinearNoAmp", "autocast", "float32",
     {"inputs": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}], "dims": {"M": [1, 4], "K": [1, 4], "N": [1, 4]},
      "reference": "tests.fixtures.transforms:linear_reference",
      "supports": {"devices": ["cuda"], "dtypes": ["float32"], "autocast": True}}),
]


@pytest.mark.parametrize("target, check, dtype, spec", REPLAYED, ids=[r[1] for r in REPLAYED])
def test_the_replay_script_of_a_cuda_failure_fails_on_cuda(tmp_path, target, check, dtype, spec):
    found = observe(entry(tmp_path, target=target, **spec), check, dtype, device="cuda", examples=8)
    assert found.verdict == VIOLATED and found.script, found.message
    script = tmp_path / "replay.py"
    script.write_text(found.script)
    done = subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr

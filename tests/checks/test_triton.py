"""Triton kernels audited on the CPU through Triton's interpreter: four planted bugs caught, each correct twin
passing, an interpreter limitation a skip naming it (``triton: interpret``; no GPU needed)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import torch
import yaml

from audit.registry.model import Entry
from audit.results.outcome import HELD, SKIPPED, VIOLATED
from audit.runtime import triton as triton_runtime
from tests.conftest import ROOT
from tests.helpers import entry, observe

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                       reason="the triton package is not installed (the test extra has it on Linux x86_64)"),
    pytest.mark.skipif(torch.cuda.is_available(),
                       reason="with CUDA present the kernels run natively, not through the interpreter"),
]

T = "tests.fixtures.triton_kernels"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 8]}, "reference": f"{T}:square_reference"}
ROWS = {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 3], "N": [1, 4]},
        "reference": f"{T}:row_sum_of_squares_reference"}

# (planted bug, its twin, registry keys, check, words its failure must say)
CASES = [
    ("MissingFactor", "Square", VECTOR, "gradcheck", "(analytic 1, numeric 2)"),
    # Each row but the last reads the next row's first element; the last reads past the tensor: whatever is there.
    ("RowPastTheEnd", "RowSumOfSquares", ROWS, "gradcheck", "Jacobian mismatch for output 0 with respect to input 0"),
    ("Float32Inside", "Square", VECTOR, "forward", "allowed atol 1e-10 + rtol 1e-09"),
    ("Strideless", "Square", VECTOR, "noncontiguous", "with non-contiguous inputs"),
]


@pytest.mark.parametrize("bug, twin, spec, check, words", CASES, ids=[c[0] for c in CASES])
def test_a_planted_triton_bug_is_caught_on_the_cpu_and_its_twin_passes(tmp_path, bug, twin, spec, check, words):
    found = observe(entry(tmp_path, name=bug.lower(), target=f"{T}:{bug}", triton="interpret", **spec), check,
                    examples=8)
    assert found.verdict == VIOLATED and words in found.message, found.message
    assert found.details["triton"].startswith("interpreted on the CPU")
    held = observe(entry(tmp_path, name=twin.lower(), target=f"{T}:{twin}", triton="interpret", **spec), check,
                   examples=8)
    assert held.verdict == HELD, held.message


def test_an_interpreter_limitation_is_a_skip_naming_it(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:ScaleByFloat", triton="interpret", inputs=[{"shape": ["N"]}]),
                    "gradcheck", examples=3)
    assert found.verdict == SKIPPED
    assert found.message.startswith("Triton's interpreter cannot run this kernel (InterpreterError: "), found.message
    assert "'float' object has no attribute 'to'" in found.message and "audit it on a CUDA device" in found.message


def test_a_launch_that_never_binds_an_argument_is_the_packages_failure_at_its_own_line(tmp_path):
    found = observe(entry(tmp_path, target=f"{T}:BlockSizeNeverPassed", triton="interpret", **VECTOR), "forward",
                    examples=3)
    assert found.verdict == VIOLATED, found.message
    assert found.message.startswith("raised TypeError: "), found.message
    assert "tests/fixtures/triton_kernels.py" in found.message and "in forward)" in found.message
    assert "interpreter" not in found.message


@pytest.mark.slow
def test_a_worker_interprets_the_kernels_of_a_run_that_has_a_triton_entry(tmp_path):
    """Nothing in the environment asks for the interpreter: the worker sets it at start-up, before Dynamo (imported
    by the compile cell of the entry before) imports triton; the cell records it."""
    entries = [{"name": "cube", "target": "tests.fixtures.broken:Cube", "inputs": [{"shape": ["N"]}]},
               {"name": "missing", "target": f"{T}:MissingFactor", "triton": "interpret", **VECTOR},
               {"name": "square", "target": f"{T}:Square", "triton": "interpret", **VECTOR}]
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@t", "supports": {
        "dtypes": ["float64"], "devices": ["cpu"]}}, "entries": entries}))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out",
                           str(tmp_path / "out"), "--check", "compile", "--check", "gradcheck", "--examples", "5",
                           "--unclaimed-timeout", "20", "--progress", "off", "-j", "1", "--no-cache"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    cells = {(e["name"], c["check"]): c for e in json.loads((tmp_path / "out" / "matrix.json").read_text())["entries"]
             for c in e["cells"]}
    assert cells["missing", "gradcheck"]["status"] == "fail", cells["missing", "gradcheck"]["message"]
    assert cells["square", "gradcheck"]["status"] == "pass", cells["square", "gradcheck"]["message"]
    assert cells["square", "gradcheck"]["metrics"]["triton"].startswith("interpreted on the CPU")


def test_with_cuda_present_the_cpu_cells_say_why_they_do_not_run(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    spec = Entry(name="k", owners=("@t",), kind="function", target=f"{T}:Square", inputs=(), triton="interpret")
    unbuilt = triton_runtime.prepare(spec)
    assert "run on CUDA here" in unbuilt["cpu"] and "TRITON_INTERPRET" not in os.environ
    assert triton_runtime.prepare(Entry(name="k", owners=("@t",), kind="function", target="m:F", inputs=())) == {}


H = "tests.fixtures.triton_half"
HALF_ROWS = {"inputs": [{"shape": ["B", "N"], "domain": [-8, 8]}], "dims": {"B": [1, 3], "N": [1, 40]},
             "reference": f"{H}:softmax_reference", "supports": {"dtypes": ["bfloat16", "float16"]}}


@pytest.mark.parametrize("check", ["forward", "gradcheck", "dtype"])
def test_a_half_only_triton_kernel_is_judged_by_the_precisions_own_error(tmp_path, check):
    held = observe(entry(tmp_path, name="softmax", target=f"{H}:Softmax", triton="interpret", **HALF_ROWS), check,
                   "float16")
    assert held.verdict == HELD, held.message
    if check == "forward":
        return
    found = observe(entry(tmp_path, name="off", target=f"{H}:SoftmaxOff", triton="interpret", **HALF_ROWS), check,
                    "float16")
    assert found.verdict == VIOLATED and "x float16's own" in found.message, found.message


def test_where_the_interpreter_does_not_round_to_nearest_the_cell_is_a_skip_for_a_gpu(monkeypatch, tmp_path):
    """Triton 3.x's interpreter truncates float32 to bfloat16 (its cast passes no rounding mode): the correct kernel
    above then fails in bfloat16 under the interpreter, against a softmax backward at probabilities near 1."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernel = entry(tmp_path, name="softmax", target=f"{H}:Softmax", triton="interpret", **HALF_ROWS)
    found = observe(kernel, "gradcheck", "bfloat16")
    reason = triton_runtime.untrusted(kernel, "bfloat16")
    if reason:
        assert found.verdict == SKIPPED and found.message == reason
        assert "truncates" in reason and "on a CUDA device" in reason
    else:  # an interpreter that rounds to nearest: judged like float16
        assert found.verdict == HELD, found.message
    assert triton_runtime.untrusted(kernel, "float16") == ""


def test_a_conversion_the_probe_finds_wrong_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setitem(triton_runtime._PROBED, "float16", [0.5, 0.5, 0.5, 0.5])
    kernel = entry(tmp_path, target=f"{H}:Softmax", triton="interpret", **HALF_ROWS)
    assert "does not round float32 to float16" in triton_runtime.untrusted(kernel, "float16")
    assert triton_runtime.untrusted(entry(tmp_path, target=f"{H}:Softmax", **HALF_ROWS), "float16") == ""

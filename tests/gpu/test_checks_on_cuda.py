"""The checks' CUDA paths, on a GPU: each planted CUDA bug caught in its cell and its correct twin passing, in this
process (the bugs that damage a process, an illegal memory access and CUDA out of memory, run in workers:
``test_workers_on_cuda.py``). Marked gpu: a skip, saying why, where no CUDA device is."""

from __future__ import annotations

import pytest
import torch

from audit.checks import builtin
from audit.engine.cell import run_cell
from audit.results.outcome import HELD, SKIPPED, VIOLATED, CellKey
from audit.runtime.isolation import isolated
from audit.runtime.options import RunOptions
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry, observe

pytestmark = pytest.mark.gpu

P = "bench.gpu.planted"
X = "tests.fixtures.transforms"
ON_CUDA = {"supports": {"devices": ["cuda"]}}
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 8]}}
LINEAR = {"inputs": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}], "dims": {"M": [1, 4], "K": [1, 4], "N": [1, 4]},
          "reference": f"{X}:linear_reference"}


def on_cuda(tmp_path, target: str, check: str, dtype: str = "float64", spec: dict = VECTOR, **supports):
    """The outcome of ``check`` on ``target`` in a CUDA cell."""
    subject = entry(tmp_path, target=target, **spec, supports={"devices": ["cuda"], **supports})
    return observe(subject, check, dtype, device="cuda", examples=10)


def test_a_host_tensor_returned_for_a_cuda_input_fails_the_device_check(tmp_path):
    found = on_cuda(tmp_path, f"{P}:NumpyTanh", "device")
    assert found.verdict == VIOLATED, found.message
    assert "is on cpu for inputs on cuda" in found.message or "expected device cuda" in found.message, found.message
    assert on_cuda(tmp_path, f"{P}:NumpyTanhOnDevice", "device").verdict == HELD


def test_a_parity_mismatch_fails_the_device_check_though_each_device_is_consistent(tmp_path):
    found = on_cuda(tmp_path, f"{P}:GeluFastOnCuda", "device")
    assert found.verdict == VIOLATED and "(cuda vs cpu)" in found.message, found.message
    assert on_cuda(tmp_path, f"{P}:GeluFastOnCuda", "gradcheck").verdict == HELD
    held = on_cuda(tmp_path, f"{P}:Gelu", "device")
    assert held.verdict == HELD, held.message


def test_float16_autocast_on_cuda_catches_an_undecorated_backward(tmp_path):
    found = on_cuda(tmp_path, f"{X}:LinearNoAmp", "autocast", "float32", LINEAR, autocast=True)
    assert found.verdict == VIOLATED and "custom_bwd" in found.message, found.message
    held = on_cuda(tmp_path, f"{P}:LinearAmp", "autocast", "float32", LINEAR, autocast=True)
    assert held.verdict == HELD, held.message


def test_compile_with_inductor_on_cuda(tmp_path):
    options = RunOptions(examples=5, base=str(ROOT), compile_backend="inductor", failures=1)

    def compiled(target: str):
        subject = entry(tmp_path, target=target, **VECTOR, supports={"devices": ["cuda"], "compile": "fullgraph"})
        return run_cell(subject, resolve(subject, ROOT), builtin()["compile"], CellKey("compile", "float64", "cuda"),
                        options, True)

    found = compiled(f"{X}:ItemInForward")
    assert found.verdict == VIOLATED and "Python number" in found.message, found.message
    held = compiled("tests.fixtures.broken:Cube")
    assert held.verdict == HELD and held.details["backend"] == "inductor", held.message


def test_a_kernel_on_an_unsynchronised_side_stream_fails_forward(tmp_path):
    spec = {**VECTOR, "reference": f"{P}:doubled"}
    found = on_cuda(tmp_path, f"{P}:DoubleOnSideStream", "forward", spec=spec)
    assert found.verdict == VIOLATED, found.message
    held = on_cuda(tmp_path, f"{P}:DoubleOnSideStreamSynchronised", "forward", spec=spec)
    assert held.verdict == HELD, held.message


def test_a_stochastic_entry_draws_the_same_noise_on_cuda_as_on_the_cpu(tmp_path):
    """Its draws are made on the CPU and moved (audit.runtime.randomness), and CUDA's generator is re-seeded."""
    for check in ("device", "gradcheck"):
        held = on_cuda(tmp_path, "tests.fixtures.stochastic:Dropout", check, deterministic=False)
        assert held.verdict == HELD, (check, held.message)


def test_the_alias_check_runs_on_cuda(tmp_path):
    held = on_cuda(tmp_path, "tests.fixtures.broken:Cube", "alias")
    assert held.verdict == HELD, held.message


def test_the_distributed_check_is_a_skip_on_cuda(tmp_path):
    found = on_cuda(tmp_path, "tests.fixtures.broken:Cube", "distributed")
    assert found.verdict == SKIPPED and "NCCL on GPUs is not covered" in found.message, found.message


def test_a_cell_puts_back_the_cuda_generator_and_flags():
    torch.cuda.init()
    state, tf32 = torch.cuda.get_rng_state(), torch.backends.cuda.matmul.allow_tf32
    with isolated():
        torch.rand(4, device="cuda")
        torch.backends.cuda.matmul.allow_tf32 = not tf32
    assert torch.equal(torch.cuda.get_rng_state(), state)
    assert torch.backends.cuda.matmul.allow_tf32 == tf32

"""Kernels that never run in float64 (tests/fixtures/half_kernels.py): never called in a dtype they do not claim,
judged in half precision by the error the reference itself makes there, their planted bugs caught with the ratio
named, their correct twins held."""

from __future__ import annotations

import re

import pytest

from audit.checks import builtin
from audit.engine.plan import claimed, plan
from audit.results.outcome import ERRORED, HELD, SKIPPED, VIOLATED
from tests.helpers import entry, observe

K = "tests.fixtures.half_kernels"
HALF = {"dtypes": ["bfloat16", "float16"]}
ROWS = {"inputs": [{"shape": ["B", "N"], "domain": [-8, 8]}], "dims": {"B": [1, 3], "N": [1, 40]}}
LONG = {"inputs": [{"shape": ["B", "N"], "domain": [0, 2]}], "dims": {"B": [1, 2], "N": [1000, 3000]}}
VECTOR = {"inputs": [{"shape": ["N"], "domain": [-6, 6]}], "dims": {"N": [1, 64]}}
MATMUL = {"inputs": [{"shape": ["M", "K"], "domain": [-2, 2]}, {"shape": ["K", "N"], "domain": [-2, 2]}],
          "dims": {"M": [1, 8], "K": [1, 300], "N": [1, 8]}}


def kernel(tmp_path, name: str, reference: str | None, shape: dict, dtypes: dict = HALF):
    spec = {**shape, "supports": dtypes}
    if reference:
        spec["reference"] = f"{K}:{reference}"
    return entry(tmp_path, target=f"{K}:{name}", **spec)


CORRECT = {
    "softmax": ("Softmax", "softmax_reference", ROWS),
    "rms_norm": ("RMSNorm", "rms_norm_reference", {**ROWS, "dims": {"B": [1, 3], "N": [1, 64]}}),
    "row_sum_3000": ("RowSum", "row_sum_reference", LONG),
    "silu": ("SiLU", "silu_reference", VECTOR),
    "tiled_matmul": ("MatMul", "matmul_reference", MATMUL),
}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("check", ["forward", "gradcheck", "dtype"])
@pytest.mark.parametrize("name", sorted(CORRECT))
def test_a_correct_half_kernel_holds_against_the_precisions_own_error(tmp_path, name, check, dtype):
    target, reference, shape = CORRECT[name]
    found = observe(kernel(tmp_path, target, reference, shape), check, dtype)
    assert found.verdict == HELD, found.message
    if check != "forward":
        assert found.details["error_ratio"], "the cell records its error ratios"


@pytest.mark.parametrize("target, reference, shape, check, dtype, said", [
    ("SoftmaxOff", "softmax_reference", ROWS, "gradcheck", "bfloat16", "x bfloat16's own"),
    ("SoftmaxOff", "softmax_reference", ROWS, "dtype", "float16", "x float16's own"),
    ("SoftmaxNoMax", "softmax_reference", {**ROWS, "inputs": [{"shape": ["B", "N"], "domain": [-16, 16]}]},
     "forward", "float16", "is finite"),
    ("RowSumHalfTotal", "row_sum_reference", LONG, "forward", "float16", "float16's own"),
    ("RowSumDropsRemainder", "row_sum_reference", {**LONG, "dims": {"B": [1, 2], "N": [1, 3000]}}, "dtype",
     "bfloat16", "bfloat16's own"),
    ("SiLUSlopeOff", "silu_reference", VECTOR, "gradcheck", "float16", "x float16's own"),
], ids=["backward-3pct-bf16", "backward-3pct-fp16", "overflow-fp16", "half-running-total", "dropped-remainder",
        "activation-slope"])
def test_a_planted_half_kernel_bug_fails_naming_its_error_ratio(tmp_path, target, reference, shape, check, dtype,
                                                                said):
    found = observe(kernel(tmp_path, target, reference, shape), check, dtype)
    assert found.verdict == VIOLATED
    assert said in found.message, found.message


def test_an_overflow_names_where_and_the_inputs_that_produced_it(tmp_path):
    spec = {**ROWS, "inputs": [{"shape": ["B", "N"], "domain": [-16, 16]}]}
    found = observe(kernel(tmp_path, "SoftmaxNoMax", "softmax_reference", spec), "forward", "float16")
    assert "where the true value" in found.message, found.message
    assert re.search(r"\((inputs in \[\S+, \S+\]|every input \S+)\)", found.message), found.message
    # bfloat16 has float32's range: the same kernel does not overflow there
    assert observe(kernel(tmp_path, "SoftmaxNoMax", "softmax_reference", spec), "forward", "bfloat16").verdict == HELD


def test_a_float32_kernel_without_float64_is_judged_by_float32s_own_error(tmp_path):
    both = {"dtypes": ["float32", "bfloat16", "float16"]}
    good = observe(kernel(tmp_path, "Softmax32", "softmax_reference", ROWS, both), "gradcheck", "float32")
    assert good.verdict == HELD, good.message
    bad = observe(kernel(tmp_path, "SoftmaxOff32", "softmax_reference", ROWS, both), "gradcheck", "float32")
    assert bad.verdict == VIOLATED and "x float32's own" in bad.message, bad.message


def test_without_a_reference_a_half_gradient_is_a_skip_that_says_what_would_judge_it(tmp_path):
    found = observe(kernel(tmp_path, "Softmax", None, ROWS), "gradcheck", "bfloat16")
    assert found.verdict == SKIPPED and "add a reference" in found.message, found.message
    found = observe(kernel(tmp_path, "Softmax", None, ROWS), "dtype", "float16")
    assert found.verdict == SKIPPED and "no more precise claimed dtype" in found.message, found.message


@pytest.mark.slow
@pytest.mark.parametrize("target, dtypes", [("Softmax", HALF),
                                            ("Softmax32", {"dtypes": ["float32", "bfloat16", "float16"]})],
                         ids=["half-only", "half-and-float32"])
def test_a_kernel_is_never_called_in_a_dtype_it_does_not_claim(tmp_path, target, dtypes):
    subject = kernel(tmp_path, target, "softmax_reference", ROWS, dtypes)
    checks = builtin()
    for key in plan(subject, checks):
        if checks[key.check].resource:  # the ranks' check runs in its own processes: the matrix run covers it
            continue
        found = observe(subject, key.check, key.dtype, examples=5, claimed=claimed(subject, checks[key.check], key))
        assert "this kernel takes" not in found.message, f"{key}: {found.message}"
        if claimed(subject, checks[key.check], key):
            assert found.verdict not in (VIOLATED, ERRORED), f"{key}: {found.message}"


ILL = "tests.fixtures.ill_conditioned"
NEAR = {"kind": "callable", "inputs": [{"shape": [3], "domain": [-1, 1]}]}


@pytest.mark.parametrize("check", ["gradcheck", "forward", "dtype"])
def test_a_correct_float64_function_at_an_ill_conditioned_point_holds_against_its_reference(tmp_path, check):
    subject = entry(tmp_path, target=f"{ILL}:nearly_repeated_sqrt", reference=f"{ILL}:nearly_repeated_sqrt_reference",
                    **{**NEAR, "inputs": [{"shape": [3], "domain": [1 - 1e-10, 1 + 1e-10]}]})
    found = observe(subject, check)
    assert found.verdict == HELD, found.message


def test_its_float32_inside_twin_still_fails_at_a_well_conditioned_point(tmp_path):
    spec = {**NEAR, "reference": f"{ILL}:separated_sqrt_reference"}
    assert observe(entry(tmp_path, target=f"{ILL}:separated_sqrt", **spec), "forward").verdict == HELD
    found = observe(entry(tmp_path, target=f"{ILL}:separated_sqrt_float32", **spec), "forward")
    assert found.verdict == VIOLATED, found.message


def test_where_the_truth_is_exactly_zero_one_rounding_of_the_inputs_is_allowed():
    import torch

    from audit.kit import precision
    from tests.fixtures.half_kernels import Center, center_reference

    x = torch.full((1, 7), 1.5, dtype=torch.float32, requires_grad=True)
    got, truth, own = precision.three_runs(Center.apply, center_reference, [x], 0, torch.float32)
    (out,), (true,), (theirs,) = got[0], truth[0], own[0]
    assert float(true.abs().max()) == 0.0 and float(out.abs().max()) > 0.0  # one float32 rounding off
    assert precision.own_error_mismatches("output", [out], [true], [theirs], torch.float32, magnitude=1.5) == []
    found = precision.own_error_mismatches("output", [out + 1e-3], [true], [theirs], torch.float32, magnitude=1.5)
    assert found and "output 0: error 0.001" in found[0], found


def test_where_the_reference_is_not_finite_in_the_dtype_it_is_not_counted_as_exact():
    import torch

    from audit.kit import precision

    truth = torch.tensor([0.5, 0.25], dtype=torch.float64)
    own = torch.tensor([float("nan"), 0.25], dtype=torch.float64)
    got = torch.tensor([0.51, 0.25], dtype=torch.float64)  # off where the reference says nothing: not judged there
    assert precision.own_error_mismatches("gradient of input", [got], [truth], [own], torch.bfloat16) == []


@pytest.mark.parametrize("check", ["dtype", "gradcheck"])
def test_at_a_kink_a_subgradient_other_than_the_references_is_no_failure_in_float32(tmp_path, check):
    """ReluAtZeroOne picks 1 at 0 where torch.relu picks 0: at x = 0 (drawn: the special points try zeros) the
    reference's own gradient is off finite differences, so the float32 cell judged by its own error excuses it."""
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, "supports": {"dtypes": ["float32"]},
            "reference": "tests.fixtures.smoothness:relu_reference"}
    found = observe(entry(tmp_path, target="tests.fixtures.smoothness:ReluAtZeroOne", **spec), check, "float32")
    assert found.verdict == HELD, found.message

"""In-place and stochastic entries: correct code passes every check, the planted bugs still fail."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from audit.results.outcome import HELD, SKIPPED, VIOLATED
from tests.helpers import entry, observe
from tests.versions import STRICT_EXPORT_OF_FUNCTIONS, requires_torch

S = "tests.fixtures.inplace_stochastic"
# At least 16 elements (where torch's CPU normal_ draws float32 and float64 differently) and 2-d (so
# drawn layouts include transposed ones, which randn_like fills in memory order).
MATRIX = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [4, 6], "N": [4, 6]}}
IN_PLACE = {**MATRIX, "mutates": [0]}
SCALE = {**IN_PLACE, "target": f"{S}:ScaleInPlace"}
EXP = {**IN_PLACE, "target": f"{S}:ExpInPlace", "reference": f"{S}:exp_reference",
       "supports": {"double_backward": True}}
NOISE = {"inputs": [{"shape": ["M", "N"]}, {"shape": ["M", "N"]}], "dims": MATRIX["dims"],
         "supports": {"deterministic": False}}
REPARAM = {**NOISE, "target": f"{S}:Reparameterised", "reference": f"{S}:reparameterised_reference"}
DROPOUT = {**MATRIX, "kind": "callable", "target": f"{S}:dropout", "supports": {"deterministic": False}}

IN_PLACE_CHECKS = [("forward", "float64"), ("forward", "float32"), ("gradcheck", "float64"),
                   ("dtype", "float64"), ("dtype", "float32"), ("device", "float64"), ("determinism", "float64"),
                   ("noncontiguous", "float64"), ("alias", "float64"), ("saved_tensors", "float64"),
                   ("checkpoint", "float64"), ("undefined_grad", "float64")]
NOISE_CHECKS = [("forward", "float64"), ("forward", "float32"), ("gradcheck", "float64"), ("dtype", "float64"),
                ("dtype", "float32"), ("device", "float64"), ("noncontiguous", "float64"),
                ("saved_tensors", "float64"), ("checkpoint", "float64"), ("undefined_grad", "float64"),
                ("autocast", "float32"), ("compile", "float64"), ("export", "float64")]
DROPOUT_CHECKS = [("gradcheck", "float64"), ("dtype", "float32"), ("noncontiguous", "float64"),
                  ("saved_tensors", "float64"), ("checkpoint", "float64")]


def _ids(cells):
    return [f"{check}-{dtype}" for check, dtype in cells]


@pytest.mark.parametrize("check, dtype", IN_PLACE_CHECKS, ids=_ids(IN_PLACE_CHECKS))
def test_declared_in_place_scale_passes(tmp_path, check, dtype):
    found = observe(entry(tmp_path, **SCALE), check, dtype)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("check, dtype", IN_PLACE_CHECKS + [("gradgradcheck", "float64")],
                         ids=_ids(IN_PLACE_CHECKS + [("gradgradcheck", "float64")]))
def test_declared_in_place_exp_saving_its_output_passes(tmp_path, check, dtype):
    found = observe(entry(tmp_path, **EXP), check, dtype)
    assert found.verdict == HELD, found.message


@requires_torch(*STRICT_EXPORT_OF_FUNCTIONS)
def test_export_runs_each_program_of_an_in_place_entry_on_its_own_copy(tmp_path):
    found = observe(entry(tmp_path, **{**IN_PLACE, "target": "tests.fixtures.layout:ScaleInPlace"}), "export",
                    examples=3)
    assert found.verdict == HELD and found.details == {"non-strict": "exported", "strict": "exported"}, found


def test_an_undeclared_in_place_write_fails_alias(tmp_path):
    found = observe(entry(tmp_path, **{**SCALE, "mutates": []}), "alias")
    assert found.verdict == VIOLATED and "modified input 0 in place" in found.message, found


def test_a_declared_write_without_mark_dirty_fails_alias(tmp_path):
    found = observe(entry(tmp_path, **{**SCALE, "target": f"{S}:ScaleInPlaceUnmarked"}), "alias")
    assert found.verdict == VIOLATED and "mark_dirty" in found.message, found


def test_an_in_place_output_kept_outside_save_for_backward_fails_saved_tensors(tmp_path):
    found = observe(entry(tmp_path, **{**EXP, "target": f"{S}:ExpInPlaceStashed"}), "saved_tensors")
    assert found.verdict == VIOLATED and "outside save_for_backward" in found.message, found


def test_the_audit_never_writes_its_own_leaf(tmp_path):
    from audit.runtime.subject import Subject
    from audit.runtime.target import resolve
    from audit.inputs.case import Case, TensorArg
    from tests.helpers import ROOT

    spec = entry(tmp_path, **SCALE)
    subject = Subject(spec, resolve(spec, ROOT), "float64", "cpu")
    leaf = subject.args(Case((), (TensorArg(np.array([1.0, 3.0]), True),)))[0]
    out = subject.call([leaf])
    out.sum().backward()
    assert leaf.tolist() == [1.0, 3.0] and out.tolist() == [2.0, 6.0] and leaf.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("check, dtype", NOISE_CHECKS, ids=_ids(NOISE_CHECKS))
def test_reparameterised_noise_passes(tmp_path, check, dtype):
    found = observe(entry(tmp_path, **REPARAM), check, dtype)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("check, dtype", DROPOUT_CHECKS, ids=_ids(DROPOUT_CHECKS))
def test_dropout_drawn_inside_torch_passes(tmp_path, check, dtype):
    found = observe(entry(tmp_path, **DROPOUT), check, dtype)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("bug", ["NoiseGradDoubled", "NoiseGradForgotten"])
def test_a_wrong_noise_gradient_fails_gradcheck(tmp_path, bug):
    found = observe(entry(tmp_path, **{**REPARAM, "target": f"{S}:{bug}"}), "gradcheck")
    assert found.verdict == VIOLATED and "with respect to input 1" in found.message, found


def test_noise_claimed_deterministic_fails_determinism(tmp_path):
    found = observe(entry(tmp_path, **{**REPARAM, "supports": {"deterministic": True}}), "determinism")
    assert found.verdict == VIOLATED and "differs between two runs" in found.message, found


def test_noise_unclaimed_is_still_observed_nondeterministic(tmp_path):
    found = observe(entry(tmp_path, **REPARAM), "determinism", claimed=False)
    assert found.verdict == VIOLATED, found


DRAWS = {
    "randn_like": lambda t: torch.randn_like(t),
    "rand": lambda t: torch.rand(t.shape, dtype=t.dtype),
    "normal": lambda t: torch.normal(torch.zeros_like(t), torch.ones_like(t)),
    "exponential_": lambda t: torch.empty_like(t).exponential_(),
    "bernoulli_": lambda t: torch.empty_like(t).bernoulli_(0.5),
    "dropout": lambda t: torch.nn.functional.dropout(torch.ones_like(t), 0.5, training=True),
    "randint_like": lambda t: torch.randint_like(t, 10),
}


def _draw(draw, dtype, layout: str) -> torch.Tensor:
    from audit.kit.calls import reseed
    from audit.runtime import randomness

    template = torch.zeros(5, 20, dtype=dtype)  # 100 elements: torch's float32 and float64 streams differ
    template = template.t().contiguous().t() if layout == "transposed" else template
    reseed(7)
    with randomness.CanonicalDraws():
        noise = DRAWS[draw](template)
    raw = DRAWS[draw](template)
    assert (noise.dtype, noise.shape) == (raw.dtype, raw.shape)  # what torch itself gives
    return noise.double()


@pytest.mark.parametrize("draw", DRAWS)
def test_canonical_draws_are_the_same_in_every_dtype_and_layout(draw):
    expected = _draw(draw, torch.float64, "contiguous")
    for dtype, layout in ((torch.float32, "contiguous"), (torch.float64, "transposed"), (torch.bfloat16, "transposed")):
        tol = 1e-2 if dtype == torch.bfloat16 else 1e-6
        torch.testing.assert_close(_draw(draw, dtype, layout), expected, atol=tol, rtol=tol)


def test_canonical_draws_leave_a_private_generator_alone():
    from audit.runtime import randomness

    private = torch.Generator().manual_seed(3)
    expected = torch.randn(20, generator=private, dtype=torch.float32)
    private.manual_seed(3)
    with randomness.CanonicalDraws():
        got = torch.randn(20, generator=private, dtype=torch.float32)
    assert torch.equal(got, expected)


@pytest.mark.slow
def test_compile_on_a_correct_in_place_function_is_never_a_failure(tmp_path):
    """torch 2.13's compile drops mark_dirty (pytorch/pytorch#184113): a skip naming PyTorch's bug, found
    by behaviour, so that a fixed torch gives a real verdict."""
    from audit.toolkit.torch_bugs import compile_drops_mark_dirty

    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "mutates": [0], "supports": {"compile": True}}
    found = observe(entry(tmp_path, target="tests.fixtures.inplace_stochastic:ScaleInPlace", **spec), "compile",
                    examples=5)
    if compile_drops_mark_dirty("aot_eager"):
        assert found.verdict == SKIPPED and found.message.startswith("PyTorch bug, not the entry's: torch.compile")
    else:
        assert found.verdict == HELD, found.message

"""Issue 15: correct code shaped like real user code passes (linear backwards, shared or expanded gradient
memory, constant zero gradients), while the planted bugs of each class still fail, with clean messages."""

from __future__ import annotations

import pytest
import torch

from audit.kit.tolerance import Tolerance
from audit.results.outcome import HELD, VIOLATED
from audit.kit.compare import mismatch
from audit.kit.explain import torch_sentence
from tests.fixtures import correct_shapes
from tests.helpers import entry, observe

C = "tests.fixtures.correct_shapes"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [2, 5]}}
PAIR = {"inputs": [{"shape": ["N"]}, {"shape": ["N"]}], "dims": {"N": [1, 4]}}
ROWS = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
SHAPES = {
    "AddBias": ROWS,
    "Add": PAIR,
    "Concat": {"inputs": [{"shape": ["N"]}, {"shape": ["M"]}], "dims": {"N": [1, 4], "M": [1, 4]}},
    "Split": VECTOR,
    "Permute": {"inputs": [{"shape": ["A", "B", "C"]}], "dims": {"A": [2, 3], "B": [2, 3], "C": [2, 3]}},
    "Scale": VECTOR,
    "SumAll": VECTOR,
}
LINEAR = list(SHAPES)
DOUBLE = {"supports": {"double_backward": True}}


def _observe(tmp_path, name, check, spec):
    return observe(entry(tmp_path, target=f"{C}:{name}", **spec), check)


@pytest.mark.parametrize("name", LINEAR + ["Round"])
def test_a_linear_or_constant_backward_passes_gradgradcheck(tmp_path, name):
    found = _observe(tmp_path, name, "gradgradcheck", {**SHAPES.get(name, VECTOR), **DOUBLE})
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("name", LINEAR)
def test_the_linear_twins_are_correct_at_first_order(tmp_path, name):
    found = _observe(tmp_path, name, "gradcheck", SHAPES[name])
    assert found.verdict == HELD, found.message


def test_a_backward_detached_from_its_input_alone_still_fails_gradgradcheck_cleanly(tmp_path):
    found = _observe(tmp_path, "DetachedSavedInput", "gradgradcheck", {**VECTOR, **DOUBLE})
    assert found.verdict == VIOLATED
    assert "Jacobian mismatch for output 0 with respect to input 0;" in found.message
    assert ",;" not in found.message and "computed outside" not in found.message


@pytest.mark.parametrize("name", LINEAR + ["Round"])
def test_shared_expanded_or_view_gradients_pass_alias(tmp_path, name):
    found = _observe(tmp_path, name, "alias", SHAPES.get(name, VECTOR))
    assert found.verdict == HELD, found.message


# (buggy Function, registry keys, words the message must contain)
HARMFUL = [
    ("ReturnsInput", VECTOR, "after an in-place update of the gradient of input 0 (grad += 1"),
    ("ReturnsInput", VECTOR, "input 0 changed: max |delta| = 1;"),
    ("MulReturnsInput", ROWS, "update of the gradient of input 1 (grad += 1, as accumulation or in-place "
                              "clipping does), input 0 changed"),
    ("GradIntoInput", VECTOR, "backward modified input 0 in place"),
    ("ReusedGradBuffer", VECTOR, "changed by max |delta| = "),
    ("ReusedGradBuffer", VECTOR, "when the next call (forward and backward) ran with other cotangents"),
    ("CtxWorkspace", VECTOR, "when a second backward through the same graph (retain_graph=True) ran"),
    ("CachedZeroGrad", VECTOR, "input 0 (grad += 1, as accumulation or in-place clipping does), the next "
                               "call gives a different result: gradient of input 0: max |got - expected| = 1"),
    ("CtxZeroGrad", VECTOR, "a second backward through the same graph gives a different result: gradient "
                            "of input 0: max |got - expected| = 1"),
]


@pytest.mark.parametrize("name, spec, words", HARMFUL, ids=[f"{h[0]}-{i}" for i, h in enumerate(HARMFUL)])
def test_gradient_memory_that_changes_a_result_fails_alias(tmp_path, name, spec, words):
    correct_shapes._ZEROS.clear()  # CachedZeroGrad's cache, updated in place by an earlier run
    found = _observe(tmp_path, name, "alias", spec)
    assert found.verdict == VIOLATED
    assert words in found.message, found.message
    assert found.script


def test_a_nan_mismatch_says_which_side_is_nan():
    tol = Tolerance(atol=1e-7, rtol=1e-7)
    got = mismatch(torch.tensor([1.0, float("nan"), 3.0]), torch.tensor([1.0, 0.53, 3.0]), tol)
    assert got == "got NaN where expected 0.53 at index (1,) (NaN on one side only in 1 of 3 elements)"
    expected = mismatch(torch.tensor([[1.0, 0.5]]), torch.tensor([[1.0, float("nan")]]), tol)
    assert expected == "got 0.5 where expected NaN at index (0, 1) (NaN on one side only in 1 of 2 elements)"


def test_torch_sentence_drops_dangling_punctuation_and_parts_glued_sentences():
    mismatched = RuntimeError("Jacobian mismatch for output 0 with respect to input 0,\nnumerical:tensor(1.)\n")
    assert torch_sentence(mismatched) == "Jacobian mismatch for output 0 with respect to input 0"
    glued = RuntimeError("Backward is not reentrant, although analytical gradient matches numerical "
                         "gradient.The tolerance for nondeterminism was 0.0.\n\nNOTE: ...")
    assert torch_sentence(glued).endswith("numerical gradient. The tolerance for nondeterminism was 0.0")


def test_a_located_gradcheck_failure_does_not_repeat_torchs_line(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 5]}}
    found = observe(entry(tmp_path, target="tests.fixtures.broken:WrongSign", **spec), "gradcheck")
    assert found.message.startswith("Jacobian mismatch for output 0 with respect to input 0: max |analytic")
    assert "torch" not in found.message and ",;" not in found.message

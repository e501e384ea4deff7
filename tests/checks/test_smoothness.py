"""Failures at points without a derivative are not wrong gradients; failures at smooth points are."""

from __future__ import annotations

import pytest

from audit.results.outcome import HELD, VIOLATED
from tests.helpers import entry, observe

S = "tests.fixtures.smoothness"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
SQUARE = {"inputs": [{"shape": ["N", "N"]}], "dims": {"N": [2, 3]}}


@pytest.mark.parametrize("target, spec", [("Relu", VECTOR), ("SymEigvals", SQUARE),
                                          ("ReluAtZeroOne", {**VECTOR, "reference": f"{S}:relu_reference"})])
def test_a_correct_function_passes_where_it_has_no_derivative(tmp_path, target, spec):
    found = observe(entry(tmp_path, target=f"{S}:{target}", **spec), "gradcheck")
    assert found.verdict == HELD, found.message
    note = found.details["non_smooth"]
    assert note["examples"] >= 1 and "no derivative" in note["first"] and "kinks" in note["first"]


def test_a_wrong_gradient_at_a_special_smooth_point_still_fails(tmp_path):
    found = observe(entry(tmp_path, target=f"{S}:MaskedSin", **VECTOR), "gradcheck")
    assert found.verdict == VIOLATED
    assert found.case["args"][0]["values"].count(0.0) >= 1  # the special point, and only there


def test_a_wrong_gradient_is_not_hidden_behind_a_kink(tmp_path):
    found = observe(entry(tmp_path, target=f"{S}:WrongAbs", **VECTOR), "gradcheck")
    assert found.verdict == VIOLATED
    assert any(v != 0.0 for v in found.case["args"][0]["values"])  # shown where |x| is smooth


@pytest.mark.parametrize("check", ["forward", "gradcheck", "undefined_grad", "determinism", "dtype",
                                   "noncontiguous", "alias", "saved_tensors", "checkpoint"])
@pytest.mark.parametrize("target, shape", [("tests.fixtures.broken:Cube", []), (f"{S}:SquaredNorm", ["N"])])
def test_zero_dim_tensors_are_drawn_and_audited(tmp_path, check, target, shape):
    found = observe(entry(tmp_path, target=target, inputs=[{"shape": shape}]), check, examples=5)
    assert found.verdict == HELD, found.message


def test_double_backward_passes_where_the_second_derivative_is_undefined(tmp_path):
    spec = {**VECTOR, "supports": {"double_backward": True}}
    found = observe(entry(tmp_path, target=f"{S}:HalfSquaredRelu", **spec), "gradgradcheck")
    assert found.verdict == HELD, found.message
    assert "gradgradcheck disagreed" in found.details["non_smooth"]["first"]


def test_a_wrong_second_derivative_still_fails(tmp_path):
    spec = {**VECTOR, "supports": {"double_backward": True}}
    found = observe(entry(tmp_path, target=f"{S}:WrongSecondDerivative", **spec), "gradgradcheck")
    assert found.verdict == VIOLATED


PAIR = {"inputs": [{"shape": ["B", 2]}], "dims": {"B": [1, 3]}, "reference": f"{S}:hinge_reference"}


@pytest.mark.parametrize("check, dtype", [("dtype", "float64"), ("dtype", "float32"), ("gradcheck", "float64")])
def test_a_tie_between_entries_is_no_wrong_gradient(tmp_path, check, dtype):
    found = observe(entry(tmp_path, target=f"{S}:HingeDiff", **PAIR), check, dtype)
    assert found.verdict == HELD, found.message


def test_vmap_jacobians_at_a_tie_are_no_wrong_gradient(tmp_path):
    spec = {**PAIR, "supports": {"vmap": True}}
    found = observe(entry(tmp_path, target=f"{S}:HingeDiff", **spec), "vmap")
    assert found.verdict == HELD, found.message


def test_a_value_that_jumps_is_not_compared_where_it_is_not_unique(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "reference": f"{S}:direction_reference"}
    found = observe(entry(tmp_path, target=f"{S}:Direction", **spec), "forward")
    assert found.verdict == HELD, found.message
    assert "a jump" in found.details["non_smooth"]["first"]
    wrong = observe(entry(tmp_path, target=f"{S}:DirectionWrongAway", **spec), "forward")
    assert wrong.verdict == VIOLATED and any(v != 0 for v in wrong.case["args"][0]["values"])


def test_probing_stops_at_its_budget_and_the_failure_stands(tmp_path, monkeypatch):
    """A slow target's failures are not probed past the cell's budget: reported, never a timeout."""
    from audit.checking import smoothness

    monkeypatch.setattr(smoothness, "PROBE_BUDGET", 0.0)
    found = observe(entry(tmp_path, target=f"{S}:Relu", **VECTOR), "gradcheck")
    assert found.verdict == VIOLATED and found.details["non_smooth_unprobed"] >= 1


@pytest.mark.parametrize("target, where", [("RatioWithKink", "index"), ("RatioOnDiagonal", "a random direction")])
def test_a_point_without_a_derivative_is_one_in_any_direction(tmp_path, target, where):
    """The disagreement sits at a coordinate along which the function is smooth; the kink is along another
    coordinate, or only along a direction between them."""
    found = observe(entry(tmp_path, target=f"{S}:{target}", inputs=[{"shape": [2]}]), "gradcheck")
    assert found.verdict == HELD, found.message
    assert f"a kink along input 0 at {where}" in found.details["non_smooth"]["first"]


@pytest.mark.parametrize("target", ["tests.fixtures.degenerate:PolarDropsTies", f"{S}:MaskedSin"])
def test_a_wrong_gradient_at_a_point_smooth_in_every_direction_still_fails(tmp_path, target):
    found = observe(entry(tmp_path, target=target, inputs=[{"shape": ["N", "N"]}], dims={"N": [2, 3]}), "gradcheck")
    assert found.verdict == VIOLATED, found.message


def test_rounding_noise_in_a_float64_forward_is_not_excused_as_a_kink(tmp_path):
    """Before the rounding test, 11 of 20 examples were excused as kinks and the cell passed. A staircase can still
    look smooth at one step on an example (flat between two float32 values): the cell fails on the others."""
    spec = {"inputs": [{"shape": ["N"]}], "supports": {"dtypes": ["float64"]}}
    found = observe(entry(tmp_path, target="tests.fixtures.smoothness:RoundedSquare", **spec), "gradcheck")
    assert found.verdict == VIOLATED, found.details
    assert found.details.get("non_smooth", {}).get("examples", 0) <= 5, found.details
    twin = observe(entry(tmp_path, target="tests.fixtures.smoothness:ExactSquare", **spec), "gradcheck")
    assert twin.verdict == HELD, twin.message

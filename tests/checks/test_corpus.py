"""Every bug class the core checks cover: the check catches the broken Function, passes its twin."""

from __future__ import annotations

import pytest

from audit.results.outcome import HELD
from tests.helpers import entry, observe

F = "tests.fixtures.broken"
VECTOR = [{"shape": ["N"]}]
CUBE = {"inputs": VECTOR, "dims": {"N": [1, 5]}, "reference": f"{F}:cube_reference"}
ROWS = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
MATMUL = {"inputs": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}], "dims": {"M": [1, 3], "K": [1, 3], "N": [1, 3]}}
EMPTY = {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [0, 3], "N": [1, 3]}}
TWO = {"inputs": VECTOR, "dims": {"N": [1, 4]}, "reference": f"{F}:two_outputs_reference"}
DOUBLE = {**CUBE, "supports": {"double_backward": True}}
FWD = {**CUBE, "supports": {"forward_ad": True}}

# (bug, check, registry keys, words the message must contain)
BUGS = [
    ("WrongSign", "gradcheck", CUBE, "Jacobian mismatch"),
    ("WrongConstant", "gradcheck", CUBE, "max |analytic - numeric|"),
    ("WrongWhenBatched", "gradcheck", ROWS, "with B="),
    ("WrongWhenSquare", "gradcheck", MATMUL, "Jacobian mismatch"),
    ("Float32Backward", "gradcheck", CUBE, "reference's autograd gradient"),
    ("DetachedBackward", "gradgradcheck", DOUBLE, "does not require grad"),
    ("OnceDifferentiable", "gradgradcheck", DOUBLE, "once_differentiable"),
    ("WrongJvp", "forward_ad", FWD, "forward-mode"),
    ("CrashOnEmpty", "empty", EMPTY, "IndexError"),
    ("Noisy", "determinism", CUBE, "differs between two runs"),
    ("NeedsAllGrads", "undefined_grad", TWO, "alone"),
    ("WrongForward", "forward", CUBE, "max |got - expected|"),
]
TWINS = {"WrongSign": "Cube", "WrongConstant": "Cube", "WrongWhenBatched": "RowScale",
         "WrongWhenSquare": "Matmul", "Float32Backward": "Cube", "DetachedBackward": "Cube",
         "OnceDifferentiable": "Cube", "WrongJvp": "CubeJvp", "CrashOnEmpty": "SumRows", "Noisy": "Cube",
         "NeedsAllGrads": "TwoOutputs", "WrongForward": "Cube"}


# That each bug fails its cell, with these words, and replays (script exit 1, twin exit 0): tests/test_replay.py.


@pytest.mark.parametrize("bug, check, spec, words", BUGS, ids=[TWINS[b[0]] + "-" + b[1] for b in BUGS])
def test_check_passes_the_correct_twin(tmp_path, bug, check, spec, words):
    found = observe(entry(tmp_path, target=f"{F}:{TWINS[bug]}", **spec), check)
    assert found.verdict == HELD, found.message
    assert found.examples > 1


def test_float32_backward_passes_finite_differences_without_a_reference(tmp_path):
    spec = {k: v for k, v in CUBE.items() if k != "reference"}
    assert observe(entry(tmp_path, target=f"{F}:Float32Backward", **spec), "gradcheck").verdict == HELD


def test_wrong_when_batched_shrinks_to_the_smallest_failing_batch(tmp_path):
    found = observe(entry(tmp_path, target=f"{F}:WrongWhenBatched", **ROWS), "gradcheck")
    assert found.case["dims"] == {"B": 2, "N": 1}


def test_wrong_when_square_shrinks_to_a_square_factor(tmp_path):
    found = observe(entry(tmp_path, target=f"{F}:WrongWhenSquare", **MATMUL), "gradcheck")
    assert found.case["dims"]["K"] == found.case["dims"]["N"]


def test_failure_names_location_and_size(tmp_path):
    found = observe(entry(tmp_path, target=f"{F}:WrongSign", **CUBE), "gradcheck")
    assert "d out[" in found.message and "(analytic" in found.message and "atol" in found.message

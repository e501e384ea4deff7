"""partial_grad: a backward that breaks when only some inputs require grad is caught; its twin passes."""

from __future__ import annotations

import pytest

from audit.results.outcome import HELD, VIOLATED
from tests.helpers import entry, observe

P = "tests.fixtures.partial"
TWO = {"inputs": [{"shape": ["N"]}, {"shape": ["N"]}], "dims": {"N": [1, 4]}}


@pytest.mark.parametrize("bug, words", [("UnboundWhenAlone", "with only input 1 requiring grad, UnboundLocalError"),
                                        ("SkipsTermWhenAlone", "gradient of input 1 with only input 1 requiring grad")])
def test_partial_grad_catches_a_backward_that_breaks_with_some_inputs_frozen(tmp_path, bug, words):
    found = observe(entry(tmp_path, target=f"{P}:{bug}", **TWO), "partial_grad")
    assert found.verdict == VIOLATED and words in found.message, found.message  # replayed: tests/test_replay.py


def test_partial_grad_passes_the_correct_twin(tmp_path):
    found = observe(entry(tmp_path, target=f"{P}:MulAdd", **TWO), "partial_grad")
    assert found.verdict == HELD and found.examples > 1, found.message


def test_other_checks_miss_these_bugs(tmp_path):
    """Why the column exists: with every input requiring grad, both bugs are invisible."""
    for bug in ("UnboundWhenAlone", "SkipsTermWhenAlone"):
        assert observe(entry(tmp_path, target=f"{P}:{bug}", **TWO), "gradcheck").verdict == HELD


def test_partial_grad_has_no_cell_for_a_single_differentiable_input(tmp_path):
    from audit.checks import builtin

    one = entry(tmp_path, target=f"{P}:MulAdd", inputs=[{"shape": ["N"]}, {"shape": ["N"], "requires_grad": False}])
    assert not builtin()["partial_grad"].applies(one)


def test_a_second_bug_does_not_hide_the_partial_one(tmp_path):
    """gradcheck fails on the wrong sign; partial_grad still fails on what only it can see."""
    bug = entry(tmp_path, target=f"{P}:UnboundAndWrongSign", **TWO)
    assert observe(bug, "gradcheck").verdict == VIOLATED
    found = observe(bug, "partial_grad")
    assert found.verdict == VIOLATED and "UnboundLocalError" in found.message, found.message

"""No vacuous pass: a check that found nothing to compare is a ``skip`` saying so, never a ``pass``."""

from __future__ import annotations

import pytest

from audit.checks import builtin
from audit.results.outcome import HELD, SKIPPED
from tests.helpers import entry, observe

V = "tests.fixtures.vacuous"
ROWS = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}}
CLAIMS = {"supports": {"double_backward": True, "forward_ad": True, "checkpoint": True, "compile": True}}
#: The checks the issue found passing a Function whose forward returns a str; its correct twin passes them all.
LISTED = ["forward", "gradcheck", "undefined_grad", "determinism", "alias", "saved_tensors", "checkpoint"]
EVERY = [name for name, check in builtin().items() if "function" in check.kinds and name != "distributed"]


@pytest.mark.parametrize("check", EVERY)
def test_a_target_that_returns_no_tensor_never_passes(tmp_path, check):
    found = observe(entry(tmp_path, target=f"{V}:ReturnsStr", **ROWS, **CLAIMS), check, examples=5)
    assert found.verdict != HELD, (check, found.message)
    if check in LISTED:
        assert found.verdict == SKIPPED
        assert found.message.startswith("nothing to compare: the target returned no tensor (str)"), found.message


@pytest.mark.parametrize("check", LISTED)
def test_the_correct_twin_passes(tmp_path, check):
    found = observe(entry(tmp_path, target="tests.fixtures.broken:Cube", **ROWS, **CLAIMS), check, examples=5)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("check", [name for name, c in builtin().items() if c.needs_gradient])
def test_a_gradient_check_with_no_differentiable_output_never_passes(tmp_path, check):
    found = observe(entry(tmp_path, target=f"{V}:ReturnsIndices", **ROWS, **CLAIMS), check, examples=5)
    assert found.verdict != HELD, found.message
    if check in ("gradgradcheck", "shared_grad"):  # these already fail such a target, saying why
        return
    assert found.verdict == SKIPPED, found.message
    assert found.message.startswith("nothing to compare: no output carries a gradient (outputs of dtype int64"), \
        found.message


def test_a_callable_that_returns_none_skips_its_gradient_check(tmp_path):
    found = observe(entry(tmp_path, target=f"{V}:returns_none", kind="callable", **ROWS), "gradcheck", examples=5)
    assert found.verdict == SKIPPED and "returned no tensor (NoneType)" in found.message

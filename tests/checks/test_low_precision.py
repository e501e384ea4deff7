"""float16 and bfloat16 claims: correct code whose results cancel holds, a wrong half-precision path and an
overflow fail; an entry's partial ``tolerance`` is applied, not dropped."""

from __future__ import annotations

import pytest

from audit.results.outcome import HELD, VIOLATED
from audit.runtime.subject import Subject
from audit.toolkit.jacobian import gradcheck_tolerance
from tests.helpers import entry, observe

P = "tests.fixtures.low_precision"
LOW = {"supports": {"dtypes": ["float64", "float16", "bfloat16"]}}
# Rows of 2 and 3: where cancellation is worst (the shrinker goes there too).
ROWS = {**LOW, "inputs": [{"shape": ["B", "N"], "domain": [-2, 2]}], "dims": {"B": [1, 3], "N": [1, 3]}}
WIDE = {**LOW, "inputs": [{"shape": ["N"], "domain": [-12, 12]}], "dims": {"N": [1, 4]}}


SOFTMAX = {**ROWS, "kind": "callable", "inputs": [*ROWS["inputs"], {"value": 0.7}],
           "reference": "examples.softmax:reference"}


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("target, spec", [
    # computed in half precision throughout, its given tolerance is what its owner asks for
    ("examples.softmax:softmax", {**SOFTMAX, "tolerance": {"float16": {"rtol": 1e-3}, "bfloat16": {"rtol": 1.6e-2}}}),
    (f"{P}:Center", {**ROWS, "reference": f"{P}:center_reference"}),
    (f"{P}:HalfPath", ROWS),
    (f"{P}:LogSumExp", {**WIDE, "reference": f"{P}:logsumexp_reference"}),
], ids=["softmax", "center", "half-path", "logsumexp"])
@pytest.mark.parametrize("check", ["dtype", "forward"])
def test_correct_half_precision_code_holds(tmp_path, check, dtype, target, spec):
    found = observe(entry(tmp_path, target=target, **spec), check, dtype, examples=60)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("target, dtype", [("HalfPathOff", "float16"), ("HalfPathCos", "float16"),
                                           ("HalfPathCos", "bfloat16")])
def test_a_wrong_half_precision_path_fails(tmp_path, target, dtype):
    # bfloat16 resolves about 0.4%, and its comparison allows 8 eps (6%) of the scale: 3% off is within it.
    found = observe(entry(tmp_path, target=f"{P}:{target}", **ROWS), "dtype", dtype)
    assert found.verdict == VIOLATED
    assert "output 0: max |got - expected|" in found.message and f"in {dtype}, against float64" in found.message


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_backward_that_cancels_in_half_precision_is_judged_against_torchs_own(tmp_path, dtype):
    # examples.softmax computes p * (g - <g, p>) in the input's dtype; torch's own softmax backward rounds once:
    # at rows of 2 the difference cancels, and the example's gradient is several times less accurate than torch's.
    found = observe(entry(tmp_path, target="examples.softmax:softmax", **SOFTMAX), "dtype", dtype, examples=60)
    assert found.verdict == VIOLATED
    assert f"x {dtype}'s own" in found.message and "the reference's error in" in found.message, found.message


def test_an_overflow_in_float16_fails(tmp_path):
    found = observe(entry(tmp_path, target=f"{P}:LogSumExpOverflows", **WIDE), "dtype", "float16")
    assert found.verdict == VIOLATED
    assert "got inf" in found.message


def test_a_partial_tolerance_is_applied_with_each_checks_own_default(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "reference": "tests.fixtures.broken:cube_reference",
            "supports": {"dtypes": ["float32"]}}
    wrong = "tests.fixtures.broken:WrongForward"  # off by 1e-3
    assert observe(entry(tmp_path, target=wrong, **spec), "forward", "float32").verdict == VIOLATED
    loose = entry(tmp_path, target=wrong, **spec, tolerance={"float32": {"atol": 1e-2}})
    assert observe(loose, "forward", "float32").verdict == HELD
    subject = Subject(loose, target=None, dtype="float32", device="cpu")
    assert subject.tolerance().rtol == 1.3e-6  # the comparison's own rtol
    assert gradcheck_tolerance(subject) == (1e-2, 1e-2)  # gradcheck's rtol stays gradcheck's

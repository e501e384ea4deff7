"""A reference that is undefined (NaN or inf where the target is finite) or raises is no verdict on the target."""

from __future__ import annotations

import numpy as np
import pytest

from audit.checking import judgement
from audit.checks import builtin
from audit.catalog.interface import Violation
from audit.inputs.case import Case, TensorArg
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from audit.results.outcome import HELD, VIOLATED
from tests.helpers import ROOT, entry, observe

D = "tests.fixtures.degenerate"
S = "tests.fixtures.smoothness"
SQUARE = {"inputs": [{"shape": ["N", "N"]}], "dims": {"N": [2, 3]}}
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}}


def judged(spec, check: str, values, dtype: str = "float64") -> Subject:
    """``check`` run on one chosen case of ``spec``'s single input; the subject, for its metrics."""
    subject = Subject(spec, resolve(spec, ROOT), dtype, "cpu")
    values = np.asarray(values, dtype=np.float64)
    judgement.examine(builtin()[check], subject, Case(dims=(("N", values.shape[0]),), args=(TensorArg(values, True),)))
    return subject


@pytest.mark.parametrize("check", ["gradcheck", "dtype"])
def test_a_correct_matrix_square_root_passes_where_its_eigh_reference_is_nan(tmp_path, check):
    spec = entry(tmp_path, target=f"{D}:SqrtmShifted", reference=f"{D}:sqrtm_shifted_reference", **SQUARE)
    subject = judged(spec, check, np.zeros((3, 3)))
    note = subject.metrics["reference_undefined"]
    assert note["examples"] == 1 and "NaN" in note["first"] and "inconclusive" in note["first"], note


@pytest.mark.parametrize("check", ["gradcheck", "dtype"])
def test_a_correct_target_passes_where_the_reference_gradient_is_nan(tmp_path, check):
    spec = entry(tmp_path, target=f"{S}:Sin", reference=f"{D}:sin_undefined_at_zero", **VECTOR)
    subject = judged(spec, check, [0.0, 0.5])
    assert "index [0]" in subject.metrics["reference_undefined"]["first"]


def test_a_wrong_gradient_where_the_reference_is_nan_still_fails(tmp_path):
    spec = entry(tmp_path, target=f"{S}:MaskedSin", reference=f"{D}:sin_undefined_at_zero", **VECTOR)
    with pytest.raises(Violation, match=r"reference.s gradient is undefined or unreliable here.*smooth point"
                                        r".*analytic 0\b.*numeric 1\b"):
        judged(spec, "dtype", [0.0, 0.5])


def test_cells_pass_and_record_where_the_reference_is_undefined(tmp_path):
    spec = entry(tmp_path, target=f"{S}:Sin", reference=f"{D}:sin_undefined_at_zero", **VECTOR)
    for check in ("gradcheck", "dtype", "forward"):
        found = observe(spec, check)
        assert found.verdict == HELD, (check, found.message)
    wrong = entry(tmp_path, target=f"{S}:MaskedSin", reference=f"{D}:sin_undefined_at_zero", **VECTOR)
    assert observe(wrong, "dtype").verdict == VIOLATED


@pytest.mark.parametrize("reference, check, said", [
    ("reference_raising_in_backward", "gradcheck", "the reference raised RuntimeError: the reference's backward"),
    ("reference_raising_in_backward", "dtype", "the reference raised RuntimeError: the reference's backward"),
    ("reference_raising", "forward", "the reference raised ValueError: the reference cannot run"),
])
def test_an_exception_in_the_reference_is_named_as_the_reference_s(tmp_path, reference, check, said):
    spec = entry(tmp_path, target=f"{S}:Sin", reference=f"{D}:{reference}", **VECTOR)
    found = observe(spec, check, examples=3)
    assert found.verdict == VIOLATED and found.message.startswith(said), found.message


@pytest.mark.parametrize("check", ["gradcheck", "dtype"])
def test_a_reference_whose_own_gradient_fails_finite_differences_is_no_verdict(tmp_path, check):
    """With two equal singular values in A, I + AAᵀ has two eigenvalues equal up to rounding: eigh's gradient is
    finite there, and wrong (1e-16 / 1e-16; off by 0.44 here)."""
    from audit.inputs.special import _repeated_singular_values

    spec = entry(tmp_path, target=f"{D}:SqrtmShifted", reference=f"{D}:sqrtm_shifted_reference", **SQUARE)
    subject = judged(spec, check, _repeated_singular_values(3))
    assert "own gradient disagrees with finite differences" in subject.metrics["reference_undefined"]["first"]

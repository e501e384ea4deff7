"""A reference's gradient trusted only as far as it can be at the point: an eigh-based reference at nearly repeated
eigenvalues cannot decide against an exact target (its own gradient is off its own finite differences by as much
as the target differs from it), while a target off by a relative 1e-6 at a well-separated point still fails."""

from __future__ import annotations

import pytest

from audit.checking import judgement
from audit.catalog.interface import Violation
from audit.checks import builtin
from audit.inputs.case import Case, TensorArg
from audit.runtime.options import RunOptions
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from tests.fixtures.ill_conditioned import eigenvalues_at
from tests.helpers import ROOT, entry

ILL = "tests.fixtures.ill_conditioned"


def _examine(tmp_path, target: str, gap: float, check: str = "dtype"):
    """The check's property on the one matrix with eigenvalues 1, 1 + gap, 2.5, in a float64 cell; the subject."""
    found = entry(tmp_path, kind="callable", target=f"{ILL}:{target}", reference=f"{ILL}:sqrt_of_symmetric_reference",
                  inputs=[{"shape": [3, 3], "domain": [-3, 3]}])
    subject = Subject(found, resolve(found, ROOT), "float64", "cpu", 0, RunOptions(base=str(ROOT)))
    case = Case(dims=(), args=(TensorArg(eigenvalues_at(gap), requires_grad=True),))
    judgement.examine(builtin()[check], subject, case)
    return subject


@pytest.mark.parametrize("check", ["dtype", "gradcheck"])
@pytest.mark.parametrize("gap", [1e-9, 1e-11])
def test_at_nearly_repeated_eigenvalues_the_eigh_reference_cannot_decide_and_says_why(tmp_path, gap, check):
    subject = _examine(tmp_path, "sqrt_of_symmetric", gap, check)
    said = subject.metrics["reference_undefined"]["first"]
    assert "the reference cannot decide" in said and "off its own finite differences by up to" in said


@pytest.mark.parametrize("check", ["dtype", "gradcheck"])
def test_a_target_off_by_a_relative_1e_6_at_a_well_separated_point_still_fails(tmp_path, check):
    assert "reference_undefined" not in _examine(tmp_path, "sqrt_of_symmetric", 1.0, check).metrics
    with pytest.raises(Violation, match="gradient of input 0"):
        _examine(tmp_path, "slightly_off_sqrt_of_symmetric", 1.0, check)


def test_the_reference_error_is_measured_from_the_reference_alone():
    import torch

    from audit.checking.reference import gradient_error
    from tests.fixtures.ill_conditioned import sqrt_of_symmetric_reference

    def at(gap):
        return [torch.tensor(eigenvalues_at(gap), dtype=torch.float64, requires_grad=True)]

    near, far = gradient_error(sqrt_of_symmetric_reference, at(1e-9), 0), gradient_error(
        sqrt_of_symmetric_reference, at(1.0), 0)
    assert near > 1e-9 and far < 1e-9 and near > 100 * far

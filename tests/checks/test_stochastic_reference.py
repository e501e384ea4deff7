"""A stochastic entry's reference is compared draw by draw only where it draws as the target does: a correct
target that consumes the random stream otherwise samples the same distribution with other numbers."""

from __future__ import annotations

import numpy as np
import pytest

from audit.inputs.case import Case, TensorArg
from audit.results.outcome import HELD, VIOLATED
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry, observe

S = "tests.fixtures.stochastic"
INPLACE = "tests.fixtures.inplace_stochastic"
DROPOUT = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [1, 3], "N": [1, 3]},
           "supports": {"deterministic": False}, "reference": f"{S}:dropout_reference"}
NOISE = {"inputs": [{"shape": ["M", "N"]}, {"shape": ["M", "N"]}], "dims": {"M": [4, 6], "N": [4, 6]},
         "supports": {"deterministic": False}, "reference": f"{INPLACE}:reparameterised_reference"}


@pytest.mark.parametrize("check, dtype", [("forward", "float64"), ("gradcheck", "float64"), ("dtype", "float64"),
                                          ("forward", "float32")])
def test_a_target_that_draws_otherwise_is_not_compared_draw_by_draw(tmp_path, check, dtype):
    found = observe(entry(tmp_path, target=f"{S}:DropoutTwoDraws", **DROPOUT), check, dtype, examples=10)
    assert found.verdict == HELD, found.message
    assert "draws its random numbers otherwise" in found.details["reference"]


def test_the_draws_are_told_apart_and_alike_ones_recognised(tmp_path):
    case = Case((), (TensorArg(values=np.ones((2, 3)), requires_grad=True),))
    two = entry(tmp_path, target=f"{S}:DropoutTwoDraws", **DROPOUT)
    assert not Subject(two, resolve(two, ROOT), "float64", "cpu").reference_draws_alike(case)
    alike = entry(tmp_path, target=f"{INPLACE}:Reparameterised", **NOISE)
    pair = Case((), (TensorArg(values=np.ones((4, 4)), requires_grad=True),
                     TensorArg(values=np.ones((4, 4)), requires_grad=True)))
    assert Subject(alike, resolve(alike, ROOT), "float64", "cpu").reference_draws_alike(pair)


def test_a_reference_that_draws_alike_is_still_compared_draw_by_draw(tmp_path):
    # Self-consistent (finite differences agree), drawing as its reference does, twice the noise: only the
    # comparisons with the reference see it.
    found = observe(entry(tmp_path, target=f"{INPLACE}:TwiceTheNoise", **NOISE), "forward")
    assert found.verdict == VIOLATED and "max |got - expected|" in found.message
    found = observe(entry(tmp_path, target=f"{INPLACE}:TwiceTheNoise", **NOISE), "gradcheck")
    assert found.verdict == VIOLATED and "against the reference" in found.message


def test_an_entry_already_stochastic_is_not_told_to_claim_it(tmp_path):
    spec = {**DROPOUT, "supports": {"deterministic": False}}
    found = observe(entry(tmp_path, target=f"{S}:Dropout", **spec), "determinism", claimed=False, examples=5)
    assert found.verdict == VIOLATED and "differs between two runs" in found.message
    assert "deterministic: false" not in found.message

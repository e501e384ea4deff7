"""A constant tensor argument (``constant:``): a number fills the shape, a list gives every value; the dtype and
device follow the cell; no gradient unless asked for; every way it can be mis-written is a registry error."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from audit.inputs.special import plain_cases, special_cases
from audit.inputs.strategies import cases
from audit.registry.load import load_registry
from audit.results.outcome import HELD
from tests.helpers import entry, observe

C = "tests.fixtures.constants"
BOUND = {"kind": "callable", "target": f"{C}:clamp_below", "inputs": [{"shape": ["N"], "kinks": [0.1]},
                                                                     {"shape": [], "constant": 0.1}]}
SCALE = {"kind": "callable", "target": f"{C}:scaled",
         "inputs": [{"shape": [3]}, {"shape": [3], "constant": [0.5, 1.0, 2.0], "requires_grad": True}]}


def test_a_constant_is_the_same_in_every_drawn_special_and_fixed_case(tmp_path):
    found = entry(tmp_path, **BOUND)
    drawn = []

    @settings(max_examples=10, database=None)
    @given(cases(found))
    def collect(case):
        drawn.append(case.args[1])

    collect()
    made = [c.args[1] for c in special_cases(found) + plain_cases(found, 0)] + drawn
    assert all(a.values.shape == () and float(a.values) == 0.1 and not a.requires_grad for a in made)


def test_a_list_gives_every_value_and_a_learned_constant_takes_a_gradient(tmp_path):
    found = entry(tmp_path, **SCALE)
    (case, *_) = plain_cases(found, 0)
    assert np.array_equal(case.args[1].values, [0.5, 1.0, 2.0]) and case.args[1].requires_grad


@pytest.mark.parametrize("spec", [BOUND, SCALE], ids=["bound", "scale"])
@pytest.mark.parametrize("check", ["gradcheck", "dtype"])
def test_entries_with_constants_hold_their_gradient_checks(tmp_path, spec, check):
    found = observe(entry(tmp_path, **spec), check, "float32" if check == "dtype" else "float64", examples=5)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("given, key, said", [
    ({"shape": ["N"], "constant": [1.0, 2.0]}, "constant", "expected a fixed shape for a list of 2 values"),
    ({"shape": [3], "constant": [1.0, 2.0]}, "constant", "expected 3 values for shape [3], got 2"),
    ({"shape": [], "constant": 0.1, "domain": [0, 1]}, "domain", "expected no domain on a constant input"),
    ({"shape": [2, 2], "constant": 1.0, "layout": "sparse_coo"}, "layout", "expected no layout on a constant input"),
    ({"shape": [], "constant": "a"}, "constant", "expected a number or a list"),
])
def test_a_mis_written_constant_is_a_registry_error_naming_the_key(write_registry, given, key, said):
    from audit.core.errors import RegistryError

    path = write_registry([{"name": "e", "owner": "@x", "kind": "callable", "target": f"{C}:scaled",
                            "inputs": [{"shape": [3]}, given]}])
    with pytest.raises(RegistryError) as raised:
        load_registry(path)
    text = str(raised.value)
    assert f"entries[0].inputs[1].{key}: " in text and said in text, text

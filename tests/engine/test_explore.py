"""Exploring a property: the shrink keeps the first failure's kind."""

from __future__ import annotations

import pytest
from hypothesis import strategies as st

from audit.catalog.interface import Violation
from audit.engine.explore import explore
from audit.kit.compare import Finding, mismatches
from audit.kit.tolerance import Tolerance


def test_a_shrink_that_changes_the_failure_s_kind_is_not_taken():
    """A bug for large values, and another near 0, where shrinking would like to land (as a wrong second
    derivative shrank onto mu = 0, where a different bug showed)."""
    seen = []

    def prop(x: float) -> None:
        if x > 0.5:
            seen.append(x)
            raise Violation(f"gradient of input 0: max |got - expected| = {x:.3g}")
        if seen and x < 0.1:
            raise Violation("raised ZeroDivisionError: float division by zero")

    found = explore(prop, st.floats(0, 1), examples=50, seed_value=1)
    assert seen and not found.held and found.message.startswith("gradient of input 0"), found.message
    assert found.case > 0.5  # the first kind's case (Hypothesis may call 1.0 simpler than 0.78: either is fine)


def test_a_violation_carries_its_kind_without_where_or_by_how_much():
    import torch

    [found] = mismatches("gradient of input", [torch.tensor([1.0, 2.5])], [torch.tensor([1.0, 2.0])],
                         Tolerance(1e-6, 1e-6))
    assert Violation(found).kind == "gradient of input 0"
    assert Violation(Finding("any words 1e-3", "gradient of input 0")).kind == "gradient of input 0"
    assert Violation("output 0: max 2.5", kind="Jacobian mismatch").kind == "Jacobian mismatch"
    # without a declared kind: what failed, before the colon (the house style puts the numbers after it)
    assert Violation("output 0: max 2.5").kind == Violation("output 0: max 1e-3").kind
    assert Violation("output 0: max 1e-3").kind != Violation("output 1: max").kind
    assert Violation("raised ValueError").kind == "raised ValueError"


def test_the_shrink_follows_a_declared_kind_whatever_the_words():
    def prop(x: float) -> None:
        if x > 0.5:
            raise Violation(f"the gradient is off by {x:.3g} here", kind="gradient of input 0")

    found = explore(prop, st.floats(0, 1), examples=50, seed_value=1)
    assert not found.held and found.kind == "gradient of input 0"
    assert found.case <= 0.51 or found.case == 1.0, found.case  # shrunk, though every message differs


def test_the_cases_do_not_depend_on_which_modules_were_imported_before(tmp_path, monkeypatch):
    """Hypothesis would draw number literals of any local module imported: another entry's target loaded
    first in the same worker must not change a cell's cases."""
    import importlib

    from audit.inputs.strategies import for_check
    from audit.checks import builtin
    from tests.helpers import entry as make_entry

    subject = make_entry(tmp_path, target="tests.fixtures.broken:Cube", inputs=[{"shape": ["N"], "domain": [-9, 9]}],
                         dims={"N": [1, 6]})
    strategy = for_check(subject, builtin()["forward"])

    def drawn():
        seen = []
        explore(lambda case: seen.append(case.describe() + repr(case.args[0].values.tolist())), strategy,
                examples=60, seed_value=7)
        return seen

    before = drawn()
    (tmp_path / "odd_literals.py").write_text("\n".join(f"C{i} = {v!r}" for i, v in enumerate(
        [1.2345678, -7.654321, 3.3333, 8.125, -2.71828, 0.000123, 4.4444, -5.5555] * 4)) + "\nN = [2, 3, 5, 17, 123]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("odd_literals")
    assert drawn() == before


def test_a_search_hashes_no_source_and_prints_a_case_as_its_shapes(monkeypatch):
    """No database, so no key: Hypothesis would hash the test's tokenized source at every search. And a passing
    explicit example (a special point) is printed by Hypothesis all the same: as its shapes, not value by value."""
    import hypothesis.core
    import numpy as np
    from hypothesis.vendor.pretty import pretty

    from audit.inputs.case import Case, TensorArg

    monkeypatch.setattr(hypothesis.core, "function_digest", lambda test: pytest.fail("the test's source was hashed"))
    case = Case(dims=(("N", 3),), args=(TensorArg(values=np.arange(3.0), requires_grad=True),))
    found = explore(lambda x: None, st.floats(0, 1), examples=5, seed_value=1, special=(case,))
    assert found.held and found.special == 1
    assert pretty(case) == "Case([3]) with N=3"

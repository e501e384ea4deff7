"""A property's values are worked out once per case and check, and every caller gets its own dict."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from audit.checks import builtin
from audit.checking.replayable import values
from audit.inputs.case import Case, TensorArg
from audit.runtime.options import RunOptions
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry


def _case(n: int) -> Case:
    return Case(dims=(("N", n),), args=(TensorArg(values=np.linspace(-1.0, 1.0, n), requires_grad=True),))


def test_values_are_worked_out_once_a_case_and_given_fresh(tmp_path):
    cube = entry(tmp_path, target="tests.fixtures.broken:Cube", inputs=[{"shape": ["N"]}], dims={"N": [1, 3]})
    subject = Subject(cube, resolve(cube, ROOT), "float64", "cpu", 7, RunOptions(base=str(ROOT)))
    asked = []
    check = builtin()["gradcheck"]
    check = replace(check, script_values=lambda s, c, own=check.script_values: asked.append(c) or own(s, c))
    first, second = _case(2), _case(3)
    found = values(check, subject, first)
    found["seed"] = -1  # a caller's change stays its own
    assert values(check, subject, first)["seed"] == 7 and asked == [first]
    assert values(check, subject, second)["options"]["eps"] == 1e-6 and asked == [first, second]
    assert values(replace(check, name="forward"), subject, second) and len(asked) == 3  # another check asks anew


def test_a_property_that_cannot_be_hashed_still_gets_the_values_it_names():
    from dataclasses import dataclass

    from audit.checking.replayable import accepted

    @dataclass
    class Prop:  # eq without frozen: unhashable
        def __call__(self, fn, ref, args, *, seed, tol):
            return []

    assert accepted(Prop(), {"seed": 1, "tol": 2, "dtype": 3}) == {"seed": 1, "tol": 2}
    assert accepted(lambda fn, ref, args, **rest: [], {"seed": 1}) == {"seed": 1}

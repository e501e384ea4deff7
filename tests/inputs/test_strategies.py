"""Drawn cases honour the registry: shared dims, ranges, domains, kinks, pinned dtypes, values."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, find, given, settings

from audit.inputs.case import Case
from audit.inputs.strategies import KINK_MARGIN, away_from_kinks, cases
from audit.registry.model import Entry, TensorSpec, ValueSpec

ENTRY = Entry(name="e", owners=("@o",), kind="function", target="m:F",
              inputs=(TensorSpec(("B", "N"), domain=(-2.0, 2.0), kinks=(0.0, 1.0)), TensorSpec(("N",)),
                      TensorSpec(("B",), dtype="int64", domain=(0.0, 3.0), requires_grad=False), ValueSpec(0.5)),
              dims=(("B", 0, 3), ("N", 2, 2)))
FAST = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))


@FAST
@given(cases(ENTRY))
def test_cases_respect_dims_domains_and_kinks(case):
    dims = dict(case.dims)
    x, w, index, value = case.args
    assert 0 <= dims["B"] <= 3 and dims["N"] == 2
    assert x.values.shape == (dims["B"], 2) and w.values.shape == (2,) and index.values.shape == (dims["B"],)
    assert np.all((-2 <= x.values) & (x.values <= 2))
    assert np.all(np.abs(x.values - 0.0) >= KINK_MARGIN * 4 - 1e-12)
    assert np.all(np.abs(x.values - 1.0) >= KINK_MARGIN * 4 - 1e-12)
    assert index.values.dtype == np.int64 and not index.requires_grad and x.requires_grad
    assert value.value == 0.5


@FAST
@given(cases(ENTRY, empty=True))
def test_empty_cases_zero_a_zeroable_dim(case):
    assert dict(case.dims)["B"] == 0 and case.args[0].values.size == 0


@FAST
@given(cases(ENTRY))
def test_cases_round_trip_through_json(case):
    again = Case.from_json(case.to_json())
    assert again.dims == case.dims
    for a, b in zip(again.args, case.args):
        if hasattr(a, "values"):
            assert np.array_equal(a.values, b.values) and a.values.dtype == b.values.dtype
        else:
            assert a == b


def test_kink_push_stays_in_domain():
    spec = TensorSpec(("N",), domain=(0.0, 1.0), kinks=(1.0,))
    assert away_from_kinks(0.999, spec) == 1.0 - KINK_MARGIN
    assert away_from_kinks(1.0, spec) == 1.0 - KINK_MARGIN


def test_a_zero_dim_input_is_drawn_zero_dim(tmp_path):
    from audit.runtime.subject import Subject
    from audit.runtime.target import resolve
    from tests.helpers import ROOT, entry

    spec = entry(tmp_path, target="tests.fixtures.broken:Cube", inputs=[{"shape": []}])
    case = find(cases(spec), lambda c: True)
    assert case.args[0].values.shape == ()
    assert Subject(spec, resolve(spec, ROOT), "float64", "cpu").args(case)[0].shape == ()

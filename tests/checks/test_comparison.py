"""The comparison every check uses (``audit.kit.compare.mismatch``): its quick path for the common case
(every element within its allowance) decides exactly as the full comparison does, on ordinary values and on
every special one (NaN, infinities, complex, a scale term, a magnitude), so that speed changes no verdict."""

from __future__ import annotations

import itertools

import pytest
import torch

from audit.kit.tolerance import Tolerance
from audit.kit import compare

SPECIAL = [0.0, 1.0, -1.0, 1e-300, 1e300, float("inf"), float("-inf"), float("nan")]
TOLERANCES = [Tolerance(1e-7, 1e-7), Tolerance(0.0, 0.0), Tolerance(1e-3, 1e-2, scale=1e-3), Tolerance(0.5, 0.0)]


def _pairs():
    """Expected/got pairs: special values against each other, and random tensors nudged under and over the
    tolerance."""
    generator = torch.Generator().manual_seed(0)
    for a, b in itertools.product(SPECIAL, repeat=2):
        yield torch.tensor([a, 1.0], dtype=torch.float64), torch.tensor([b, 1.0], dtype=torch.float64)
    for scale in (1e-12, 1e-8, 1e-6, 1e-3, 1.0):
        expected = torch.randn(3, 4, dtype=torch.float64, generator=generator)
        yield expected + scale * torch.randn(3, 4, dtype=torch.float64, generator=generator), expected
        complex_expected = torch.randn(5, dtype=torch.complex128, generator=generator)
        yield complex_expected + scale * torch.randn(5, dtype=torch.complex128, generator=generator), complex_expected
        yield (expected + scale).to(torch.float32), expected


@pytest.mark.parametrize("tol", TOLERANCES, ids=str)
@pytest.mark.parametrize("magnitude", [0.0, 10.0])
def test_the_quick_path_decides_as_the_full_comparison(tol, magnitude, monkeypatch):
    quick = [compare.mismatch(got, expected, tol, magnitude) for got, expected in _pairs()]
    monkeypatch.setattr(compare, "within", lambda *args: False)  # the full comparison, every time
    full = [compare.mismatch(got, expected, tol, magnitude) for got, expected in _pairs()]
    assert [q is None for q in quick] == [f is None for f in full]
    assert quick == full  # and a failure's message is the full comparison's
    assert any(f is None for f in full) and any(f is not None for f in full)  # both outcomes are exercised

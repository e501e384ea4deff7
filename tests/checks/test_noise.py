"""Two computations of the same value may differ by their own rounding noise, measured, and by no more."""

from __future__ import annotations

import pytest
import torch

from audit.kit import noise as kit_noise
from audit.results.outcome import HELD, VIOLATED
from audit.toolkit import noise
from tests.helpers import entry, observe

W = "tests.fixtures.two_ways"
NEAR_1E9 = {"inputs": [{"shape": ["N"], "domain": [1e9, 1e9 + 1]}], "dims": {"N": [2, 6]}, "supports": {"vmap": True}}
ROWS = {"inputs": [{"shape": ["M", "N"], "domain": [1e9, 1e9 + 1]}], "dims": {"M": [2, 4], "N": [2, 6]}}


def test_a_vmap_rule_that_rounds_otherwise_passes_within_the_measured_noise(tmp_path, monkeypatch):
    """The shifted mean and the plain one differ by 1.2e-7 at values near 1e-3 (a fixed allowance: 1e-7)."""
    spec = entry(tmp_path, target=f"{W}:CenteredBatched", **NEAR_1E9)
    assert observe(spec, "vmap").verdict == HELD
    monkeypatch.setattr(kit_noise, "NOISE_FACTOR", 0)  # the vmap property's allowance: the replay kit's factor
    assert observe(spec, "vmap").verdict == VIOLATED


@pytest.mark.parametrize("target, check, spec, twin", [
    ("CenteredBatchedWrongDim", "vmap", NEAR_1E9, "CenteredBatched"),
    ("CenteredReadsAsContiguous", "noncontiguous", ROWS, "Centered"),
])
def test_a_wrong_batching_rule_or_stride_bug_still_fails(tmp_path, target, check, spec, twin):
    found = observe(entry(tmp_path, target=f"{W}:{target}", **spec), check)
    assert found.verdict == VIOLATED, found.message
    assert observe(entry(tmp_path, target=f"{W}:{twin}", **spec), check).verdict == HELD


def test_the_measured_noise_is_the_computation_s_own():
    """A mean of values near 1e9 rounds at ulp(1e9) = 1.2e-7; x³ at 0.5 at about eps."""
    near = torch.tensor([1e9 + 0.25, 1e9 + 0.5, 1e9 + 0.875], dtype=torch.float64)
    [rounded] = noise.spread(lambda xs: [[xs[0] - xs[0].mean()]], [near])
    [plain] = noise.spread(lambda xs: [[xs[0] ** 3]], [torch.full((3,), 0.5, dtype=torch.float64)])
    assert 1e-8 < rounded < 1e-5 and plain < 1e-14

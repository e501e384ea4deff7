"""statistics: a stochastic Function is compared with its reference sampler by distribution, never draw by draw.

Planted dropout bugs fail; correct twins that use the random stream otherwise than torch's dropout pass. Each
example draws the target 2,000 times: the cells here run one example on a few elements."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from audit.checks import declarations
from audit.checks import statistics as stats
from audit.catalog.checks import STATISTICS_EXAMPLES
from audit.catalog.interface import Check
from audit.engine.cell import run_cell
from audit.results.outcome import HELD, VIOLATED, CellKey
from audit.runtime.options import RunOptions
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry, observe

S = "tests.fixtures.stochastic"
NOISE = {"inputs": [{"shape": ["N"]}], "dims": {"N": [2, 3]}, "supports": {"deterministic": False}}
DROPOUT = {**NOISE, "reference": f"{S}:dropout_reference"}
JITTER = {**NOISE, "reference": f"{S}:jitter_reference"}


def _cell(tmp_path, target: str, spec: dict):
    return observe(entry(tmp_path, target=f"{S}:{target}", **spec), "statistics", examples=1)


@pytest.mark.parametrize("bug, spec, words", [
    ("DropoutScaledByP", DROPOUT, "differs from the reference's"),
    ("DropoutUnmaskedBackward", DROPOUT, "(an unbiased estimator)"),
    ("JitterWrongGrad", JITTER, "is constant over 250 draws on both sides, and differs"),
])
def test_statistics_catches_a_wrong_distribution_or_a_biased_gradient(tmp_path, bug, spec, words):
    found = _cell(tmp_path, bug, spec)
    assert found.verdict == VIOLATED and words in found.message, found.message
    assert "threshold" in found.message or "constant" in found.message


@pytest.mark.parametrize("twin, spec", [("Dropout", DROPOUT), ("DropoutTwoDraws", DROPOUT), ("Jitter", JITTER)])
def test_statistics_passes_correct_code_that_draws_otherwise_than_the_reference(tmp_path, twin, spec):
    """rand < 1 - p and an extra draw per call, against torch's bernoulli: same distribution, other draws. Jitter's
    gradient is the same constant in every draw on both sides (zero variance)."""
    found = _cell(tmp_path, twin, spec)
    assert found.verdict == HELD, found.message


def test_the_rescaled_dropout_fails_on_its_outputs(tmp_path):
    """Keeping 1 - p of the values but scaling by 1 / p: the output's distribution (KS) is named first."""
    x = torch.tensor([0.7, -1.2], dtype=torch.float64, requires_grad=True)
    from tests.fixtures.stochastic import DropoutScaledByP, dropout_reference
    message = stats.judged(DropoutScaledByP.apply, dropout_reference, [x], (), 7, 400, 5e-4, 1e-7, 1e-7)
    assert message.startswith("output 0 at index (0,): its distribution over 50 draws"), message
    assert "KS distance 0.8" in message and "Bonferroni over 2 stages and 6 statistics" in message, message


def test_statistics_has_cells_only_for_stochastic_entries_with_a_reference(tmp_path):
    applies = declarations()["statistics"].applies
    assert applies(entry(tmp_path, target=f"{S}:Dropout", **DROPOUT))
    assert not applies(entry(tmp_path, target=f"{S}:Dropout", **NOISE))  # nothing to compare with
    assert not applies(entry(tmp_path, target=f"{S}:Dropout", **{**DROPOUT, "supports": {}}))  # deterministic


def test_ks_pvalue_is_the_exact_two_sample_distribution():
    """Every arrangement of two samples of 4 (continuous: no ties) is equally likely; P(D >= c/n) counted."""
    n = 4
    arrangements = list(itertools.combinations(range(2 * n), n))
    for c in range(n + 1):
        hits = sum(_distance(set(first), n) >= c for first in arrangements)
        assert stats.ks_pvalue(n, c) == pytest.approx(hits / len(arrangements)), c


def _distance(first: set, n: int) -> int:
    """n times the KS distance when the sorted pooled sample's positions ``first`` belong to the first sample."""
    ones = twos = worst = 0
    for position in range(2 * n):
        ones, twos = ones + (position in first), twos + (position not in first)
        worst = max(worst, abs(ones - twos))
    return worst


def test_values_within_the_tolerance_are_no_difference():
    """Dropout's kept value computed as x * (1 / (1 - p)) and x / (1 - p) differ in the last bit: the atoms of two
    otherwise equal discrete distributions must not count as apart (the plain KS distance would be 0.8)."""
    value = torch.tensor(0.7, dtype=torch.float64) / 0.8
    t = torch.tensor([0.0] * 20 + [value.item()] * 80, dtype=torch.float64)[:, None]
    r = torch.tensor([0.0] * 20 + [torch.nextafter(value, torch.tensor(2.0)).item()] * 80, dtype=torch.float64)[:, None]
    assert stats.ks_counts(t, r, 1e-7, 1e-7).tolist() == [0]
    assert stats.mean_pvalues(t, r, 1e-7, 1e-7).tolist() == [1.0]


def test_constant_samples_pass_when_equal_and_fail_when_apart():
    ones = torch.ones(50, 1, dtype=torch.float64)
    assert stats.mean_pvalues(ones, ones, 1e-7, 1e-7).tolist() == [1.0]
    assert stats.mean_pvalues(ones, 2 * ones, 1e-7, 1e-7).tolist() == [0.0]


def test_the_threshold_splits_alpha_over_every_statistic():
    """Bonferroni: two statistics per output element (KS, mean), one per gradient element."""
    t = torch.zeros(8, 5, dtype=torch.float64)
    count, threshold, found = stats.rejected(t, t, 2, 1e-3, 1e-7, 1e-7)
    assert (count, found) == (2 * 2 + 3, None) and threshold == pytest.approx(1e-3 / 7)
    assert stats.ALPHA / STATISTICS_EXAMPLES == pytest.approx(5e-4)


def test_a_check_caps_the_examples_of_its_cells(tmp_path):
    """Check.examples bounds a cell's examples whatever --examples says (statistics splits alpha over them)."""
    calls = []
    capped = Check(name="counted", contract="counts", run=lambda subject, case: calls.append(case), examples=2)
    subject = entry(tmp_path, target="tests.fixtures.broken:Cube", inputs=[{"shape": ["N"]}], dims={"N": [1, 9]})
    outcome = run_cell(subject, resolve(subject, ROOT), capped, CellKey("counted", "float64", "cpu"),
                       RunOptions(examples=20), True)
    assert outcome.verdict == HELD and len(calls) == 2
    assert declarations()["statistics"].examples == STATISTICS_EXAMPLES


def test_power_for_a_shift_of_a_tenth_of_a_standard_deviation():
    """docs/registry.md's figure (Stochastic entries): a z-test of one mean at the default draws and threshold
    (1 x 1 input: 3 statistics)."""
    threshold = stats.ALPHA / STATISTICS_EXAMPLES / 2 / 3
    critical = math.sqrt(2) * torch.special.erfinv(torch.tensor(1 - threshold, dtype=torch.float64)).item()
    shift = 0.1 * math.sqrt(stats.DRAWS / 2)
    power = 0.5 * math.erfc((critical - shift) / math.sqrt(2))
    assert 0.2 < power < 0.25, power


def test_each_part_is_tested_on_its_first_elements_only():
    """A large output keeps the samples' memory bounded: 256 columns per output and per gradient."""
    from tests.fixtures.stochastic import Jitter

    x = torch.zeros(300, dtype=torch.float64, requires_grad=True)
    t, parts = stats.sample(Jitter.apply, [x], (), 0, 3, 0)
    assert t.shape == (3, 512) and parts == [("output 0", (300,), 256), ("gradient of input 0", (300,), 256)]


def test_a_stochastic_target_that_raises_fails_the_check_rather_than_erring_the_audit(tmp_path):
    """Writing the failure's replay script asks whether target and reference draw alike, outside the property:
    the target's raise there used to escape as "the audit failed"."""
    spec = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [1, 2], "N": [1, 3]},
            "supports": {"deterministic": False}, "reference": "tests.fixtures.stochastic:dropout_reference"}
    found = observe(entry(tmp_path, target="tests.fixtures.stochastic:DropoutRaising", **spec), "forward", examples=3)
    assert found.verdict == VIOLATED and found.message.startswith("raised ValueError"), found.message

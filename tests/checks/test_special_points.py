"""Special points searched on purpose: a bug at a rotation, at equal arguments or at a repeated singular value is
found though random draws never land there; a correct twin passes, and the cases are few and deterministic."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from audit.checks import builtin
from audit.engine.cell import run_cell
from audit.inputs.special import KINDS, special_cases
from audit.results.outcome import HELD, VIOLATED, CellKey
from audit.runtime.options import RunOptions
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry, observe

D = "tests.fixtures.degenerate"
SQUARE = {"inputs": [{"shape": ["N", "N"]}], "dims": {"N": [2, 3]}}
PAIR = {"inputs": [{"shape": ["M", "N"]}, {"shape": ["M", "N"]}], "dims": {"M": [2, 4], "N": [1, 3]}}


def without_special_points(spec, check: str):
    """The cell as it was before special points: random draws only."""
    options = RunOptions(examples=20, seed=0, base=str(ROOT), failures=1)
    chosen = replace(builtin()[check], special=False)
    return run_cell(spec, resolve(spec, ROOT), chosen, CellKey(check, "float64", "cpu"), options, True)


def test_a_polar_factor_that_drops_the_terms_of_tied_singular_values_fails_at_a_rotation(tmp_path):
    spec = entry(tmp_path, target=f"{D}:PolarDropsTies", **SQUARE)
    found = observe(spec, "gradcheck")
    assert found.verdict == VIOLATED and "Jacobian mismatch" in found.message, found.message
    assert found.case["dims"]["N"] == 3 and found.details["special_points"] >= 1  # a special point, after the draws
    assert without_special_points(spec, "gradcheck").verdict == HELD  # random draws alone miss it


def test_the_correct_polar_factor_passes_at_every_special_point(tmp_path):
    found = observe(entry(tmp_path, target=f"{D}:Polar", **SQUARE), "gradcheck")
    assert found.verdict == HELD, found.message


def test_a_covariance_distance_with_a_nan_gradient_at_equal_arguments_fails(tmp_path):
    found = observe(entry(tmp_path, target=f"{D}:CovarianceDistanceThroughNorm", **PAIR), "gradcheck")
    assert found.verdict == VIOLATED and "analytic NaN" in found.message, found.message
    a, b = found.case["args"]
    assert a["values"] == b["values"]


def test_the_correct_covariance_distance_passes(tmp_path):
    found = observe(entry(tmp_path, target=f"{D}:CovarianceDistance", **PAIR), "gradcheck")
    assert found.verdict == HELD, found.message


def test_a_correct_matrix_square_root_passes_the_special_points_where_its_reference_is_nan(tmp_path):
    spec = entry(tmp_path, target=f"{D}:SqrtmShifted", reference=f"{D}:sqrtm_shifted_reference", **SQUARE)
    found = observe(spec, "gradcheck")
    assert found.verdict == HELD, found.message
    assert found.details["reference_undefined"]["examples"] >= 1


def test_special_cases_are_few_deterministic_and_inside_the_domain(tmp_path):
    spec = entry(tmp_path, target=f"{D}:CovarianceDistance", inputs=[
        {"shape": ["N", "N"], "domain": [-2, 2]}, {"shape": ["N", "N"], "domain": [-2, 2]}, {"shape": ["N"]}],
        dims={"N": [1, 5]})
    cases = special_cases(spec)
    assert 1 <= len(cases) <= len(KINDS) + 1  # a case per kind that applies, then the largest sizes
    assert [json.dumps(c.to_json()) for c in cases] == [json.dumps(c.to_json()) for c in special_cases(spec)]
    assert all(abs(v) <= 2 for c in cases for a in c.args for v in a.values.reshape(-1))
    assert all(dict(c.dims)["N"] == 3 for c in cases[:-1]) and dict(cases[-1].dims)["N"] == 5
    assert any((c.args[0].values == c.args[1].values).all() and c.args[0].values.std() > 0 for c in cases)


@pytest.mark.parametrize("kinks, absent", [([0.0], 0.0), ([0.5], 0.5)])
def test_special_cases_keep_away_from_declared_kinks(tmp_path, kinks, absent):
    spec = entry(tmp_path, target=f"{D}:CovarianceDistance", inputs=[{"shape": ["N"], "kinks": kinks}],
                 dims={"N": [1, 3]})
    assert special_cases(spec)
    assert all(absent not in c.args[0].values for c in special_cases(spec))


@pytest.mark.parametrize("check, target, supports", [
    ("gradgradcheck", "tests.fixtures.broken:Cube", {"double_backward": True}),
    ("forward_ad", "tests.fixtures.broken:CubeJvp", {"forward_ad": True}),
])
def test_the_second_order_and_forward_mode_checks_try_the_special_points_too(tmp_path, check, target, supports):
    spec = entry(tmp_path, target=target, inputs=[{"shape": ["N"]}], dims={"N": [1, 4]}, supports=supports)
    found = observe(spec, check)
    assert found.verdict == HELD, found.message
    assert len(special_cases(spec)) == 5  # zeros, all equal, -1, 1, the largest N: after the draws, counted apart
    assert found.examples == 20 and found.details["special_points"] == 5


def test_the_last_special_case_has_the_largest_sizes_within_a_budget_of_elements(tmp_path):
    from audit.inputs.special import LARGEST_ELEMENTS

    small = entry(tmp_path, target=f"{D}:CovarianceDistance", inputs=[{"shape": ["B", "N"]}, {"shape": ["N"]}],
                  dims={"B": [1, 3], "N": [1, 20]})
    assert dict(special_cases(small)[-1].dims) == {"B": 3, "N": 20}  # 80 elements: the top of every range
    large = entry(tmp_path, target=f"{D}:CovarianceDistance", inputs=[{"shape": ["B", "N"]}, {"shape": ["N"]}],
                  dims={"B": [2, 64], "N": [1, 512]})
    sizes = dict(special_cases(large)[-1].dims)
    assert sizes["B"] * sizes["N"] + sizes["N"] <= LARGEST_ELEMENTS
    assert sizes == {"B": 2, "N": 64}  # the outer dim down to its least first, then the innermost halved

"""Planted bugs replayed at degenerate points (tests/fixtures/degenerate.py): where the reference is undefined
the script compares as the check does (no comparison there; the target judged by finite differences)."""

from __future__ import annotations

from tests.replay import Planted

D, S = "tests.fixtures.degenerate", "tests.fixtures.smoothness"
THREE = {"inputs": [{"shape": [3]}, {"shape": [3]}, {"shape": [3]}]}
SIN = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "reference": f"{D}:sin_undefined_at_zero"}

SQUARE = {"inputs": [{"shape": ["N", "N"]}], "dims": {"N": [2, 3]}}
PAIR = {"inputs": [{"shape": ["M", "N"]}, {"shape": ["M", "N"]}], "dims": {"M": [2, 4], "N": [1, 3]}}

W = "tests.fixtures.two_ways"
NEAR_1E9 = {"inputs": [{"shape": ["N"], "domain": [1e9, 1e9 + 1]}], "dims": {"N": [2, 6]}, "supports": {"vmap": True}}
ROWS_1E9 = {"inputs": [{"shape": ["M", "N"], "domain": [1e9, 1e9 + 1]}], "dims": {"M": [2, 4], "N": [2, 6]}}

ROWS = [
    # two computations of the same value (tests/fixtures/two_ways.py): a real bug beyond their measured noise
    Planted(f"{W}:CenteredBatchedWrongDim", "vmap", NEAR_1E9, f"{W}:CenteredBatched", "vmap output"),
    Planted(f"{W}:CenteredReadsAsContiguous", "noncontiguous", ROWS_1E9, f"{W}:Centered", "non-contiguous inputs"),
    # found at special points (audit/inputs/special.py): a rotation, equal arguments
    Planted(f"{D}:PolarDropsTies", "gradcheck", SQUARE, f"{D}:Polar", "Jacobian mismatch"),
    Planted(f"{D}:CovarianceDistanceThroughNorm", "gradcheck", PAIR, f"{D}:CovarianceDistance", "analytic NaN"),
    Planted(f"{D}:NanGradient", "gradcheck", THREE, f"{D}:ProductPlusSines", "analytic NaN at d out"),
    Planted(f"{S}:MaskedSin", "dtype", SIN, f"{S}:Sin", "reference's gradient is undefined or unreliable here"),
    # rounding noise is no kink (audit/checking/smoothness.py: _rounding): found by audit mutate on entmax
    Planted(f"{S}:RoundedSquare", "gradcheck", {"inputs": [{"shape": ["N"]}], "supports": {"dtypes": ["float64"]}},
            f"{S}:ExactSquare", "Jacobian mismatch for output 0 with respect to input 0"),
]

NOT_REPLAYED: dict[str, str] = {
    f"{S}:RatioWithKink": "correct, with no derivative at 0 off the disagreeing coordinate: test_smoothness.py",
    f"{S}:RatioOnDiagonal": "correct, with no derivative at 0 along the diagonal only: test_smoothness.py",
    f"{D}:SqrtmShifted": "correct where its eigh reference is NaN, and it fails nowhere: test_reference_undefined.py",
    f"{D}:sqrtm_shifted_reference": "a reference (NaN gradient at repeated eigenvalues), not a target",
    f"{D}:sin_undefined_at_zero": "a reference (NaN gradient at 0), not a target",
    f"{D}:reference_raising": "a reference that raises: the cell names it, no target is wrong",
    f"{D}:reference_raising_in_backward": "a reference whose backward raises: the cell names it, no target is wrong",
}

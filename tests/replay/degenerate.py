"""Planted bugs replayed at degenerate points (tests/fixtures/degenerate.py): where the reference is undefined
the script compares as the check does (no comparison there; the target judged by finite differences)."""

from __future__ import annotations

from tests.replay import Planted

D, S = "tests.fixtures.degenerate", "tests.fixtures.smoothness"
THREE = {"inputs": [{"shape": [3]}, {"shape": [3]}, {"shape": [3]}]}
SIN = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "reference": f"{D}:sin_undefined_at_zero"}

ROWS = [
    Planted(f"{D}:NanGradient", "gradcheck", THREE, f"{D}:ProductPlusSines", "analytic NaN at d out"),
    Planted(f"{S}:MaskedSin", "dtype", SIN, f"{S}:Sin", "reference's gradient is undefined or unreliable here"),
]

NOT_REPLAYED: dict[str, str] = {
    f"{D}:SqrtmShifted": "correct where its eigh reference is NaN, and it fails nowhere: test_reference_undefined.py",
    f"{D}:sqrtm_shifted_reference": "a reference (NaN gradient at repeated eigenvalues), not a target",
    f"{D}:sin_undefined_at_zero": "a reference (NaN gradient at 0), not a target",
    f"{D}:reference_raising": "a reference that raises: the cell names it, no target is wrong",
    f"{D}:reference_raising_in_backward": "a reference whose backward raises: the cell names it, no target is wrong",
}

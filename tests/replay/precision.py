"""Planted half-precision bugs replayed (tests/fixtures/low_precision.py): their scripts compare in float16 or
bfloat16 as the audit does, including the scale of the largest value the float64 run passes through."""

from __future__ import annotations

from tests.replay import Planted

P = "tests.fixtures.low_precision"
HALF = {"inputs": [{"shape": ["B", "N"], "domain": [-2, 2]}], "dims": {"B": [1, 3], "N": [1, 3]},
        "supports": {"dtypes": ["float64", "float16", "bfloat16"]}}
WIDE = {**HALF, "inputs": [{"shape": ["N"], "domain": [-12, 12]}], "dims": {"N": [1, 4]}}

ROWS = [
    Planted(f"{P}:HalfPathOff", "dtype", HALF, f"{P}:HalfPath", "in float16, against float64", dtype="float16"),
    Planted(f"{P}:HalfPathCos", "dtype", HALF, f"{P}:HalfPath", "in bfloat16, against float64", dtype="bfloat16"),
    Planted(f"{P}:LogSumExpOverflows", "dtype", WIDE, f"{P}:LogSumExp", "got inf", dtype="float16"),
]

NOT_REPLAYED = {
    f"{P}:Center": "correct code that holds in float16 and bfloat16 (tests/checks/test_low_precision.py); no bug",
    f"{P}:center_reference": "a reference, not a target",
    f"{P}:logsumexp_reference": "a reference, not a target",
}

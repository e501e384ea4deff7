"""Planted Triton kernels replayed (tests/fixtures/triton_kernels.py): through Triton's interpreter where no GPU
is, as in the audit (the script sets TRITON_INTERPRET=1 before the target's import). No rows without triton."""

from __future__ import annotations

import importlib.util

from tests.replay import Planted

T = "tests.fixtures.triton_kernels"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 6]}, "reference": f"{T}:square_reference",
          "triton": "interpret"}
ROWS_SPEC = {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [2, 3], "N": [1, 3]}, "triton": "interpret",
             "reference": f"{T}:row_sum_of_squares_reference"}

H = "tests.fixtures.triton_half"
HALF = {"inputs": [{"shape": ["B", "N"], "domain": [-8, 8]}], "dims": {"B": [1, 3], "N": [1, 40]},
        "reference": f"{H}:softmax_reference", "supports": {"dtypes": ["bfloat16", "float16"]}, "triton": "interpret"}

ROWS = [
    Planted(f"{H}:SoftmaxOff", "gradcheck", HALF, f"{H}:Softmax", "x float16's own", dtype="float16"),
    Planted(f"{T}:MissingFactor", "gradcheck", VECTOR, f"{T}:Square", "(analytic 1, numeric 2)"),
    Planted(f"{T}:Float32Inside", "forward", VECTOR, f"{T}:Square", "max |got - expected|"),
    Planted(f"{T}:Strideless", "noncontiguous", VECTOR, f"{T}:Square", "with non-contiguous inputs"),
    Planted(f"{T}:RowPastTheEnd", "forward", ROWS_SPEC, f"{T}:RowSumOfSquares", "max |got - expected|"),
    Planted(f"{T}:BlockSizeNeverPassed", "forward", VECTOR, f"{T}:Square", "raised TypeError"),
] if importlib.util.find_spec("triton") else []

NOT_REPLAYED: dict[str, str] = {
    f"{T}:ScaleByFloat": ("correct on a GPU; Triton's interpreter cannot run its kernel, so its CPU cells are skips "
                          "naming the limitation (test_triton.py): no failing cell"),
    f"{T}:square_reference": "a reference",
    f"{T}:row_sum_of_squares_reference": "a reference",
    f"{H}:softmax_reference": "a reference",
}

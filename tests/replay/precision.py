"""Planted half-precision bugs replayed (tests/fixtures/low_precision.py, half_kernels.py) and a float32-inside
square root (ill_conditioned.py): their scripts compare in float16, bfloat16 or float32 as the audit does, by the
scale of the largest value the float64 run passes through or by the reference's own error in the dtype."""

from __future__ import annotations

from tests.replay import Planted

P = "tests.fixtures.low_precision"
HALF = {"inputs": [{"shape": ["B", "N"], "domain": [-2, 2]}], "dims": {"B": [1, 3], "N": [1, 3]},
        "supports": {"dtypes": ["float64", "float16", "bfloat16"]}}
WIDE = {**HALF, "inputs": [{"shape": ["N"], "domain": [-12, 12]}], "dims": {"N": [1, 4]}}

K = "tests.fixtures.half_kernels"
KERNEL = {"inputs": [{"shape": ["B", "N"], "domain": [-8, 8]}], "dims": {"B": [1, 3], "N": [1, 40]},
          "reference": f"{K}:softmax_reference", "supports": {"dtypes": ["bfloat16", "float16"]}}
KERNEL32 = {**KERNEL, "supports": {"dtypes": ["float32", "bfloat16", "float16"]}}
LONG = {"inputs": [{"shape": ["B", "N"], "domain": [0, 2]}], "dims": {"B": [1, 2], "N": [1000, 3000]},
        "reference": f"{K}:row_sum_reference", "supports": {"dtypes": ["bfloat16", "float16"]}}
ACTIVATION = {"inputs": [{"shape": ["N"], "domain": [-6, 6]}], "dims": {"N": [1, 64]},
              "reference": f"{K}:silu_reference", "supports": {"dtypes": ["bfloat16", "float16"]}}
ILL = "tests.fixtures.ill_conditioned"
SEPARATED = {"kind": "callable", "inputs": [{"shape": [3], "domain": [-1, 1]}],
             "reference": f"{ILL}:separated_sqrt_reference"}

ROWS = [
    Planted(f"{K}:SoftmaxOff", "gradcheck", KERNEL, f"{K}:Softmax", "x bfloat16's own", dtype="bfloat16"),
    Planted(f"{K}:SoftmaxOff32", "gradcheck", KERNEL32, f"{K}:Softmax32", "x float32's own", dtype="float32"),
    Planted(f"{K}:SoftmaxNoMax", "forward", {**KERNEL, "inputs": [{"shape": ["B", "N"], "domain": [-16, 16]}]},
            f"{K}:Softmax", "where the true value", dtype="float16"),
    Planted(f"{K}:RowSumHalfTotal", "forward", LONG, f"{K}:RowSum", "float16's own", dtype="float16"),
    Planted(f"{K}:RowSumDropsRemainder", "dtype", {**LONG, "dims": {"B": [1, 2], "N": [1, 3000]}}, f"{K}:RowSum",
            "bfloat16's own", dtype="bfloat16"),
    Planted(f"{K}:SiLUSlopeOff", "gradcheck", ACTIVATION, f"{K}:SiLU", "x float16's own", dtype="float16"),
    Planted(f"{ILL}:separated_sqrt_float32", "forward", SEPARATED, f"{ILL}:separated_sqrt", "max |got - expected|"),
    Planted(f"{P}:HalfPathOff", "dtype", HALF, f"{P}:HalfPath", "in float16, against float64", dtype="float16"),
    Planted(f"{P}:HalfPathCos", "dtype", HALF, f"{P}:HalfPath", "in bfloat16, against float64", dtype="bfloat16"),
    Planted(f"{P}:LogSumExpOverflows", "dtype", WIDE, f"{P}:LogSumExp", "got inf", dtype="float16"),
]

NOT_REPLAYED = {
    f"{P}:Center": "correct code that holds in float16 and bfloat16 (tests/checks/test_low_precision.py); no bug",
    f"{P}:center_reference": "a reference, not a target",
    f"{P}:logsumexp_reference": "a reference, not a target",
    f"{K}:RMSNorm": "a correct kernel (tests/checks/test_half_kernels.py); no bug",
    f"{K}:MatMul": "a correct kernel (tests/checks/test_half_kernels.py); no bug",
    f"{K}:Center": "a correct kernel whose truth is exactly zero (tests/checks/test_half_kernels.py); no bug",
    **{f"{K}:{name}_reference": "a reference, not a target" for name in ("softmax", "rms_norm", "row_sum", "silu",
                                                                           "matmul", "center")},
    f"{ILL}:SymmetricSqrt": "the Function behind the callables separated_sqrt and nearly_repeated_sqrt",
    f"{ILL}:SymmetricSqrtFloat32": "the Function behind separated_sqrt_float32, which has a row",
    f"{ILL}:nearly_repeated_sqrt": "correct code at an ill-conditioned point (test_half_kernels.py); no bug",
    **{f"{ILL}:{name}_reference": "a reference, not a target" for name in ("nearly_repeated_sqrt", "separated_sqrt")},
}

"""Planted bugs replayed on sparse inputs (tests/fixtures/sparse_ops.py): gradients of a sparse input in the wrong
layout, outside its pattern, with wrong values, or off the dense reference's on its pattern (COO and CSR), and
of a Function whose output is sparse too."""

from __future__ import annotations

from tests.replay import Planted

S = "tests.fixtures.sparse_ops"
DIMS = {"M": [1, 3], "K": [1, 3], "N": [1, 3]}


def _matmul(layout: str) -> dict:
    """A (sparse, of ``layout``) @ B (dense), with the dense reference."""
    return {"inputs": [{"shape": ["M", "K"], "layout": layout}, {"shape": ["K", "N"]}], "dims": DIMS,
            "reference": f"{S}:dense_matmul_reference"}


COO, CSR = _matmul("sparse_coo"), _matmul("sparse_csr")
#: A sparse input and a sparse output (checked through to_dense, as torch's gradcheck asks).
SCALE = {"inputs": [{"shape": ["M", "K"], "layout": "sparse_coo"}], "dims": {"M": [1, 3], "K": [1, 3]}}
TWIN = f"{S}:SparseDenseMatmul"

ROWS = [
    Planted(f"{S}:DenseGradient", "gradcheck", COO, TWIN, "came back strided (dense), expected sparse_coo"),
    Planted(f"{S}:WidePatternGradient", "gradcheck", CSR, TWIN, "outside the input's pattern"),
    Planted(f"{S}:MultipliedGradient", "gradcheck", COO, TWIN, "(masked: unspecified elements of sparse inputs "
            "ignored): Jacobian mismatch"),
    Planted(f"{S}:Float32Gradient", "gradcheck", CSR, TWIN, "against the reference's autograd gradient"),
    Planted(f"{S}:SparseScaleForgetsFactor", "gradcheck", SCALE, f"{S}:SparseScale", "Jacobian mismatch"),
]

#: fixture name ("module:Name") -> why it has no row of its own
NOT_REPLAYED: dict[str, str] = {
    f"{S}:dense_matmul_reference": "a reference, not a target",
}

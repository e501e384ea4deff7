"""Sparse inputs: building one from a drawn case, and what its gradient must be (the replay kit's functions, so
that a replay script rebuilds the audit's sparse inputs and judges their gradients exactly as the cell did)."""

from __future__ import annotations

from audit.kit.sparse import sparse_from, sparse_gradient_problem, specified, through_dense

__all__ = ["sparse_from", "sparse_gradient_problem", "specified", "through_dense"]

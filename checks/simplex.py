"""A local check: outputs of simplex-valued entries (softmax, sparsemax, ...) are probability vectors.

Entries opt in with ``checks: [simplex]``. It runs with the built-in checks' interface and shows up as
its own matrix column. Its property, :func:`simplex`, is one function in plain torch (and replay-kit names,
:mod:`audit.kit`): with no ``run`` given, the audit holds it (its first message fails the case), and a failing
cell's replay script carries its source and calls it the same way, with the values ``script_values`` gives written
out.
"""

from __future__ import annotations

import torch

from audit.catalog.interface import Check, claimed_dtypes
from audit.kit.tensors import outputs_of

SLACK = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


def simplex(fn, ref, args, *, slack) -> list:
    """The first output is >= 0 and sums to 1 over its last dim, within ``slack`` per element (the dtype's
    rounding)."""
    with torch.no_grad():
        (out, *_) = outputs_of(fn(*args))
    if out.numel() == 0:
        return []
    low = out.min().item()
    if low < -slack:
        return [f"a probability is negative: min {low:.3g}"]
    error = (out.double().sum(dim=-1) - 1).abs()
    if error.max().item() > slack * out.shape[-1]:
        row = tuple(int(i) for i in (error == error.max()).nonzero()[0])
        return [f"row {row} sums to {1 + error.max().item():.17g}, not 1 (slack {slack:g} per element)"]
    return []


CHECK = Check(
    name="simplex",
    contract="each output row is a probability vector: non-negative and summing to 1",
    dtypes=claimed_dtypes,
    replay=simplex,
    script_values=lambda subject, case: {"slack": SLACK[subject.dtype]},
)

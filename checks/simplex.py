"""A local check: outputs of simplex-valued entries (softmax, sparsemax, ...) are probability vectors.

Entries opt in with ``checks: [simplex]``. It runs with the built-in checks' interface and shows up as
its own matrix column.
"""

from __future__ import annotations

import torch

from audit.checks.interface import Check, Violation, claimed_dtypes
from audit.toolkit.tensors import outputs_of

SLACK = {"float64": 1e-12, "float32": 1e-6, "float16": 1e-3, "bfloat16": 1e-2}


def run(subject, case) -> None:
    """Every output is >= 0 and sums to 1 over its last dim (within the dtype's rounding)."""
    with torch.no_grad():
        (out, *_) = outputs_of(subject.call(subject.args(case)))
    if out.numel() == 0:
        return
    slack = SLACK[subject.dtype]
    low = out.min().item()
    if low < -slack:
        raise Violation(f"a probability is negative: min {low:.3g}")
    error = (out.double().sum(dim=-1) - 1).abs()
    if error.max().item() > slack * out.shape[-1]:
        row = tuple(int(i) for i in (error == error.max()).nonzero()[0])
        raise Violation(f"row {row} sums to {1 + error.max().item():.17g}, not 1 (slack {slack:g} per element)")


CHECK = Check(
    name="simplex",
    contract="each output row is a probability vector: non-negative and summing to 1",
    run=run,
    dtypes=claimed_dtypes,
    script="""\
p = fn(*args)
print(p.min(), p.sum(-1))
""",
)

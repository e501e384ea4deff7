"""How far low-precision rounding may move a result: the largest value its computation passes through.

A result computed in float16 or bfloat16 carries the rounding error of every step before it, each a few
units of the dtype's precision times that step's values. Where a result cancels to near zero (a softmax
backward's ``p * (g - <g, p>)`` with one probability near 1, a layer norm over two nearly equal numbers),
its error is set by the operands, not by itself, and no tolerance relative to the result holds. So a
low-precision comparison that fails at the result's own scale is judged again at the scale of the largest
value the same computation passes through in float64: inputs, every intermediate, cotangents and gradients.
A wrong half-precision path, garbage or an overflow stays far outside that.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from audit.registry.model import Tolerance
from audit.toolkit.tensors import compare_all
from audit.toolkit.violation import Violation


class Largest(TorchDispatchMode):
    """Records the largest finite |value| among the floating tensors every operation takes and returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in (*args, *(kwargs or {}).values(), *(out if isinstance(out, (tuple, list)) else (out,))):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                finite = value.detach().abs().nan_to_num(nan=0.0, posinf=0.0)
                self.largest = max(self.largest, float(finite.max()))
        return out


def largest_value(run) -> float:  # no annotation that needs an import: replay scripts copy this source
    """The largest finite |value| any operation took or produced while ``run()`` ran (forward and backward)."""
    with Largest() as mode:
        run()
    return mode.largest


def compare_rounded(label: str, got, expected, tol: Tolerance, run: Callable[[], float]) -> None:
    """:func:`compare_all`; when it fails with a ``scale`` term (float16, bfloat16), again with that term
    applied to ``run()``, the largest value the float64 computation passes through (see the module)."""
    try:
        compare_all(label, got, expected, tol)
    except Violation:
        if not tol.scale:
            raise
        compare_all(label, got, expected, tol, magnitude=run())


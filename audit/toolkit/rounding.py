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

from collections.abc import Callable

from audit.kit import Largest, largest_value, rounded_mismatches
from audit.registry.model import Tolerance
from audit.toolkit.violation import Violation


def compare_rounded(label: str, got, expected, tol: Tolerance, run: Callable[[], float]) -> None:
    """A :class:`Violation` naming the first of ``got`` not close to ``expected``, judged by
    :func:`audit.kit.rounded_mismatches` (see the module)."""
    found = rounded_mismatches(label, got, expected, tol, run)
    if found:
        raise Violation(found[0])


__all__ = ["Largest", "compare_rounded", "largest_value"]

"""The one tolerance type: of the registry, the checks and the kit's comparisons (and a replay script's ``tol``).
Imports no torch, so that the registry reads it without torch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """Comparison tolerances for one dtype: ``got`` is close to ``expected`` where
    ``|got - expected| <= atol + scale * max|expected| + rtol * |expected|``, element by element.

    ``scale`` is a share of the tensor's largest value: in low precision a rounding error grows with the
    operands of a computation, not with each result, so an element that cancels to near 0 (a softmax
    gradient, ``x - mean(x)``) carries an error of a few units of the dtype's precision times the tensor's
    scale. It is 0 (elementwise only) in float64 and float32.
    """

    atol: float
    rtol: float
    scale: float = 0.0

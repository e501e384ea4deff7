"""Tensor helpers shared by the checks: the replay kit's (:mod:`audit.kit`), and the two that raise
:class:`Violation` for a check's ``run``."""

from __future__ import annotations

from audit.kit import (NO_GRADIENT_OUTPUT, dense, detached, differentiable, differentiated, filled, floating,
                       grad_inputs, grad_outputs, gradients, mismatch, mismatches, number, outputs_of, wide, widest,
                       within)
from audit.registry.model import Tolerance
from audit.toolkit.violation import Violation

__all__ = ["compare_all", "dense", "detached", "differentiable", "filled", "floating", "grad_inputs", "grad_outputs",
           "gradients", "mismatch", "number", "outputs_of", "vjp", "wide", "widest", "within"]


def vjp(fn, args, inputs, seed: int = 0, *, create_graph: bool = False):
    """Outputs of ``fn(*args)`` and the gradients of <outputs, random cotangents> w.r.t. ``inputs``
    (:func:`audit.kit.differentiated`); a :class:`Violation` when no output is differentiable."""
    found = differentiated(fn, args, inputs, seed, create_graph)
    if found is None:
        raise Violation(NO_GRADIENT_OUTPUT)
    return found


def compare_all(label: str, got, expected, tol: Tolerance, magnitude: float = 0.0) -> None:
    """Raise :class:`Violation` naming the first of ``got`` that is not close to ``expected`` (``magnitude``:
    see :func:`audit.kit.mismatch`)."""
    found = mismatches(label, got, expected, tol, magnitude)
    if found:
        raise Violation(found[0])

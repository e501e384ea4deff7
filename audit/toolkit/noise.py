"""How far two computations of the same value may differ: by their own rounding noise, measured, not fixed.

vmap against the loop, compile against eager, a non-contiguous input against a contiguous one, a checkpoint
against a plain run: each pair agrees in exact arithmetic and differs by rounding, by how much depends on
the point. An eigendecomposition near a repeated eigenvalue turns the 1e-16 of float64 into 1e-7, and a
fixed allowance of 1e-7 + 1e-7·|expected| fails a correct batched LAPACK call there.

The noise is measured on the baseline computation itself, as the spread between evaluations that agree
in exact arithmetic up to curvature: :func:`spread` evaluates it at x + d and x - d for small seeded steps
d (a few dozen units of the dtype's precision) and takes the second difference f(x + d) - 2 f(x) + f(x - d).
The slope cancels; what stays is the rounding noise of three evaluations that round on their own, as
amplified by the point (an ill-conditioned eigenproblem, a cancellation). A comparison that fails at the fixed
tolerance is tried again with :data:`FACTOR` times that spread added to its atol; only then does it fail.
Measured on correct and planted code (docs/checks.md, **Two computations of the same value**): correct pairs
differ by at most about 2x their spread, while a wrong batching rule, a dropped term or a stride bug differs by
1e5x or more wherever the point is not itself ill-conditioned.
"""

from __future__ import annotations

from audit.kit.noise import NOISE_FACTOR, NOISE_SAMPLES, NOISE_STEP, measured_noise, noisy_mismatches, perturbed, spread
from audit.kit.tolerance import Tolerance
from audit.core.violation import Violation

FACTOR, SAMPLES, STEP = NOISE_FACTOR, NOISE_SAMPLES, NOISE_STEP


#: A callable giving, once and only when first called, the spread of ``compute(args)``: one float for each group
#: of tensors it returns (say outputs, then gradients).
noise = measured_noise


def compare_within_noise(label: str, got, expected, tol: Tolerance, measured) -> None:
    """A :class:`Violation` naming the first of ``got`` not close to ``expected`` even with ``FACTOR`` times
    ``measured()`` (the group's spread, a float) added to atol (:func:`audit.kit.noise.noisy_mismatches`)."""
    found = noisy_mismatches(label, got, expected, tol, measured)
    if found:
        raise Violation(found[0])


__all__ = ["FACTOR", "SAMPLES", "STEP", "compare_within_noise", "noise", "perturbed", "spread"]

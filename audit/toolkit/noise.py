"""How far two computations of the same value may differ: by their own rounding noise, measured, not fixed.

vmap against the loop, compile against eager, a non-contiguous input against a contiguous one, a checkpoint
against a plain run: each pair agrees in exact arithmetic and differs by rounding, by how much depends on
the point. An eigendecomposition near a repeated eigenvalue turns the 1e-16 of float64 into 1e-7, and a
fixed allowance of 1e-7 + 1e-7·|expected| fails a correct batched LAPACK call there.

The noise is measured on the baseline computation itself, as the spread between evaluations that agree
in exact arithmetic up to curvature: :func:`spread` evaluates it at x + d and x - d for small seeded steps
d (a few dozen units of the dtype's precision) and takes the second difference f(x + d) - 2 f(x) + f(x - d).
The slope cancels; what stays is the rounding noise of three evaluations that round on their own, as
amplified by the point (an ill-conditioned eigenproblem, a cancellation). A comparison that fails at the fixed tolerance is tried again with
:data:`FACTOR` times that spread added to its atol; only then does it fail. Measured on correct and
planted code (docs/checks.md, **Two computations of the same value**): correct pairs differ by at most about
2x their spread, while a wrong batching rule, a dropped term or a stride bug differs by 1e5x or more
wherever the point is not itself ill-conditioned.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch

from audit.registry.model import Tolerance
from audit.toolkit.tensors import compare_all, mismatch
from audit.toolkit.violation import Violation

#: How many times the measured spread two computations may differ by, beyond the fixed tolerance.
FACTOR = 16
#: Seeded steps per measurement (each evaluated on both sides: 2 evaluations).
SAMPLES = 2
#: A step's size in units of the dtype's eps times the input's largest magnitude: a few ulps or more of every
#: element, so that each evaluation rounds on its own, and small enough that curvature adds nothing.
STEP = 64


def noise(compute, args):
    """A callable giving, once and only when first called, the spread of ``compute(args)``: one float for each
    group of tensors it returns (say outputs, then gradients)."""
    return functools.cache(lambda: spread(compute, args))


def spread(compute, args):  # plain torch: replay scripts embed its source (with perturbed and STEP, SAMPLES)
    """For each group of tensors ``compute(args)`` returns (say outputs, then gradients), the largest second
    difference f(x + d) - 2 f(x) + f(x - d) of any of its elements over SAMPLES seeded steps ``d`` of up to STEP
    units of the dtype's eps times max|x| per element: the slope cancels, the rounding noise of three
    evaluations at distinct points (and the amplification of an ill-conditioned point) stays."""
    base = compute(args)
    worst = [0.0] * len(base)
    for sample in range(SAMPLES):
        up, down = compute(perturbed(args, sample, 1.0)), compute(perturbed(args, sample, -1.0))
        for g, group in enumerate(base):
            for a, b, c in zip(up[g], group, down[g]):
                a, b, c = (t.to_dense() if t.layout != torch.strided else t for t in (a, b, c))
                if a.shape == b.shape == c.shape and b.numel():
                    second = (a.detach().double() - 2 * b.detach().double() + c.detach().double()).abs()
                    worst[g] = max(worst[g], float(second.nan_to_num(nan=0.0, posinf=0.0).max()))
    return worst


def perturbed(args, sample, sign=1.0):  # plain torch: replay scripts embed its source
    """``args`` with each floating strided tensor moved by ``sign`` times a seeded uniform step of up to
    STEP·eps·max|x| per element, in its own layout, a leaf requiring grad as the original does; anything else
    as it is."""
    generator = torch.Generator().manual_seed(sample)
    moved = []
    for a in args:
        if not (torch.is_tensor(a) and (a.is_floating_point() or a.is_complex()) and a.layout == torch.strided
                and a.numel()):
            moved.append(a)
            continue
        x = a.detach().clone()  # keeps the strides of a non-contiguous input
        size = sign * STEP * float(x.abs().max().double().cpu()) * torch.finfo(x.dtype).eps
        step = (torch.rand(x.shape, generator=generator, dtype=torch.float64) * 2 - 1) * size
        with torch.no_grad():
            x.add_(step.to(device=x.device, dtype=x.real.dtype if x.is_complex() else x.dtype))
        moved.append(x.requires_grad_(a.requires_grad))
    return moved


def script_helper() -> str:
    """:func:`spread` and :func:`perturbed` as source, with their constants: a replay script measures the noise
    exactly as the check does."""
    import inspect

    return (f"STEP, SAMPLES, FACTOR = {STEP!r}, {SAMPLES!r}, {FACTOR!r}\n\n\n"
            + "\n\n".join(inspect.getsource(f) for f in (spread, perturbed)))


def compare_within_noise(label: str, got, expected, tol: Tolerance, measured) -> None:
    """:func:`~audit.toolkit.tensors.compare_all`; where it fails, again with ``FACTOR`` times ``measured()`` (the
    group's spread, a float) added to atol, and a :class:`Violation` only if it still fails."""
    try:
        compare_all(label, got, expected, tol)
    except Violation:
        if len(got) != len(expected):
            raise
        width = measured()
        for i, (g, e) in enumerate(zip(got, expected)):
            problem = mismatch(g, e, replace(tol, atol=tol.atol + FACTOR * width))
            if problem:
                raise Violation(f"{label} {i}: {problem} (atol includes {FACTOR}x the rounding noise measured "
                                f"here, {width:.3g}: the second difference of the results over steps of "
                                f"{STEP} eps in the inputs)") from None

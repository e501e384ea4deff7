"""Rounding noise: two computations of the same value, their spread measured, and a mismatch judged with it."""

from __future__ import annotations

import torch
from audit.kit.compare import mismatches
from audit.kit.tolerance import Tolerance


#: How many times the measured spread two computations may differ by, beyond the fixed tolerance.
NOISE_FACTOR = 16


#: Seeded steps per measurement (each evaluated on both sides: 2 evaluations).
NOISE_SAMPLES = 2


#: A step's size in units of the dtype's eps times the input's largest magnitude: a few ulps or more of every
#: element, so that each evaluation rounds on its own, and small enough that curvature adds nothing.
NOISE_STEP = 64


def spread(compute, args):
    """For each group of tensors ``compute(args)`` returns (say outputs, then gradients), the largest second
    difference f(x + d) - 2 f(x) + f(x - d) of any of its elements over NOISE_SAMPLES seeded steps ``d`` of up to
    NOISE_STEP units of the dtype's eps times max|x| per element: the slope cancels, the rounding noise of three
    evaluations at distinct points (and the amplification of an ill-conditioned point) stays."""
    base = compute(args)
    worst = [0.0] * len(base)
    for sample in range(NOISE_SAMPLES):
        up, down = compute(perturbed(args, sample, 1.0)), compute(perturbed(args, sample, -1.0))
        for g, group in enumerate(base):
            for a, b, c in zip(up[g], group, down[g]):
                a, b, c = (t.to_dense() if t.layout != torch.strided else t for t in (a, b, c))
                if a.shape == b.shape == c.shape and b.numel():
                    second = (a.detach().double() - 2 * b.detach().double() + c.detach().double()).abs()
                    worst[g] = max(worst[g], float(second.nan_to_num(nan=0.0, posinf=0.0).max()))
    return worst


def perturbed(args, sample, sign=1.0):
    """``args`` with each floating strided tensor moved by ``sign`` times a seeded uniform step of up to
    NOISE_STEP·eps·max|x| per element, in its own layout, a leaf requiring grad as the original does; anything
    else as it is."""
    generator = torch.Generator().manual_seed(sample)
    moved = []
    for a in args:
        if not (torch.is_tensor(a) and (a.is_floating_point() or a.is_complex()) and a.layout == torch.strided
                and a.numel()):
            moved.append(a)
            continue
        x = a.detach().clone()  # keeps the strides of a non-contiguous input
        size = sign * NOISE_STEP * float(x.abs().max().double().cpu()) * torch.finfo(x.dtype).eps
        step = (torch.rand(x.shape, generator=generator, dtype=torch.float64) * 2 - 1) * size
        with torch.no_grad():
            x.add_(step.to(device=x.device, dtype=x.real.dtype if x.is_complex() else x.dtype))
        moved.append(x.requires_grad_(a.requires_grad))
    return moved


def noisy_mismatches(label: str, got, expected, tol, measured) -> list:
    """:func:`mismatches`; where some fail, again with NOISE_FACTOR times ``measured()`` (the group's spread, a
    float) added to atol, each remaining line saying so."""
    found = mismatches(label, got, expected, tol)
    if not found or len(got) != len(expected):
        return found
    width = measured()
    wider = Tolerance(tol.atol + NOISE_FACTOR * width, tol.rtol, tol.scale)
    return [line.worded(f"{line} (atol includes {NOISE_FACTOR}x the rounding noise measured here, {width:.3g}: the "
                        f"second difference of the results over steps of {NOISE_STEP} eps in the inputs)")
            for line in mismatches(label, got, expected, wider)]


def measured_noise(compute, args):
    """A callable giving :func:`spread` of ``compute`` at ``args``, measured once, when first called: a comparison
    that holds at the fixed tolerance never measures it."""
    found = []

    def measured():
        if not found:
            found.append(spread(compute, args))
        return found[0]

    return measured

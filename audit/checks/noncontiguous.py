"""``noncontiguous``: non-contiguous inputs and grad_outputs give the contiguous results."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import call_vjp
from audit.kit.calls import once
from audit.kit.compare import mismatches
from audit.kit.explain import first_line
from audit.kit.noise import noisy_mismatches, spread


def noncontiguous(fn, ref, args, *, seed, tol, layouts) -> list:
    """The outputs and gradients (cotangents drawn from ``seed``) of ``args``, laid out as drawn (``layouts`` says
    how), against those of contiguous copies, within ``tol`` plus the contiguous run's own rounding noise; then
    transposed, strided and expanded (stride 0) cotangents against dense ones."""
    contiguous = [a.detach().clone(memory_format=torch.contiguous_format).requires_grad_(a.requires_grad)
                  if isinstance(a, torch.Tensor) else a for a in args]  # new row-major storage, no offset
    expected, expected_grads = call_vjp(fn, contiguous, seed, keep="floating")
    outputs, found = call_vjp(fn, args, seed, keep="floating")
    measured = once(lambda: spread(lambda xs: list(call_vjp(fn, xs, seed, keep="floating")), contiguous))
    problems = (noisy_mismatches("output", outputs, expected, tol, lambda: measured()[0])
                or noisy_mismatches("gradient of input", found, expected_grads, tol, lambda: measured()[1]))
    if problems:
        return [f"{line} with non-contiguous inputs ({layouts}) vs contiguous ones" for line in problems]
    for layout in ("transposed", "strided", "expanded"):
        problems = cotangent_layout(fn, contiguous, seed, tol, layout)
        if problems:
            return problems
    return []


def cotangent_layout(fn, args, seed: int, tol, layout: str) -> list:
    """The gradients with cotangents laid out as ``layout`` (:func:`cotangents_laid_out`) against those with the
    same values dense, within ``tol``; a backward that raises with them fails too."""
    _, expected = call_vjp(fn, args, seed, keep="floating", layout="expanded values" if layout == "expanded" else None)
    try:
        _, got = call_vjp(fn, args, seed, keep="floating", layout=layout)
    except RuntimeError as exc:
        return [f"backward raised with {layout} grad_outputs: {first_line(exc)}"]
    return [f"{line} with {layout} grad_outputs vs contiguous ones (a backward that assumes a dense gradient layout)"
            for line in mismatches("gradient of input", got, expected, tol)]


def _values(subject, case) -> dict:
    """The entry's tolerance, and each tensor input's drawn layout in words."""
    layouts = ", ".join(f"input {i} {case.layout(i)}" for i, a in enumerate(subject.args(case))
                        if isinstance(a, torch.Tensor))
    return {**tolerance_values(subject, case), "layouts": layouts}


CHECK = declared("noncontiguous", replay=noncontiguous, replay_helpers=(cotangent_layout,),
                 script_values=_values)

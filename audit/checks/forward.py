"""``forward``: the target runs, returns finite values for finite inputs, and matches its reference."""

from __future__ import annotations

import torch

from audit.checking import replayable
from audit.catalog.checks import declared
from audit.checking.judgement import Kink, Stage
from audit.kit.compare import defined_only
from audit.kit.noise import measured_noise, noisy_mismatches
from audit.kit.precision import (largest_input, largest_value, leaves_in, own_error_mismatches, rounded_mismatches,
                                 three_runs, value_range)
from audit.kit.tensors import floating, outputs_of, widened


def forward(fn, ref, args, *, tol, dtype, own_error=False, wider_dtype=None, ratios=None, observe=None) -> list:
    """The outputs against the reference's; without a reference, finite wherever the inputs are. In a float64
    cell (or with a claimed float64) against the reference computed in float64 (complex128 for complex), cast to
    the outputs' dtype in a lower-precision cell, within ``tol`` (float16, bfloat16: at the scale of the largest
    value the target's widest claimed computation passes through, where that is larger; in float64, with the
    reference's own sensitivity at the point added where that fails); where the reference is NaN
    or inf and the target finite, nothing is compared (``observe`` is told). Where the cell is judged by the
    precision's own error (``own_error``: half precision, or float32 without float64), by :func:`by_own_error`."""
    if ref is not None and own_error:
        return by_own_error(fn, ref, args, dtype=dtype, ratios=ratios)
    with torch.no_grad():
        outputs = outputs_of(fn(*args))
    if ref is None:
        return not_finite(outputs, args)
    with torch.no_grad():
        expected = outputs_of(ref(*widened(args)))
    if dtype not in (torch.float64, torch.complex128):  # a float64 cell compares in float64, whatever the output's
        expected = [e.to(o.dtype) for o, e in zip(outputs, expected)]
    expected = defined_only(outputs, expected, observe, "output")

    def magnitude():
        with torch.no_grad():
            return largest_value(lambda: fn(*leaves_in(args, wider_dtype))) if wider_dtype is not None else 0.0

    if dtype in (torch.float64, torch.complex128):  # the reference's own sensitivity here, where tight fails
        sensitivity = measured_noise(lambda xs: [outputs_of(ref(*xs))], widened(args))
        return noisy_mismatches("output", outputs, expected, tol, lambda: sensitivity()[0])
    return rounded_mismatches("output", outputs, expected, tol, magnitude)


def by_own_error(fn, ref, args, *, dtype, ratios=None) -> list:
    """The outputs against the truth (the reference in float64 on the same rounded inputs), each allowed
    OWN_ERROR_RATIO times the error of the reference run in ``dtype`` itself plus one rounding; an inf or NaN where
    the truth is finite in ``dtype`` fails (:func:`audit.kit.precision.own_error_mismatches`)."""
    got, truth, own = three_runs(fn, ref, args, 0, dtype, gradients=False)
    return own_error_mismatches("output", got[0], truth[0], own[0] if own else None, dtype, ratios,
                                value_range(args), largest_input(args))


def not_finite(outputs, args) -> list:
    """A line for the first output that is not finite everywhere, unless an input is empty (a reduction over
    nothing may be infinite by definition: logsumexp of [] is -inf)."""
    if any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args):
        return []
    for i, out in enumerate(o.to_dense() if o.layout != torch.strided else o for o in outputs):
        if floating(out) and not torch.isfinite(out).all():
            index = tuple(int(k) for k in (~torch.isfinite(out)).nonzero()[0])
            return [f"output {i} is not finite at index {index} ({out[index].item()}) "
                    "although every input is finite and inside its domain"]
    return []


#: How the comparison with the reference is named where it says nothing (a jump, an undefined reference value).
AGAINST = "forward (against the reference)"


def _observer(subject, case):
    """Counts an example where the reference's value is undefined (:func:`audit.checking.replayable.observer`)."""
    return replayable.observer(subject, case, AGAINST)


#: A mismatch with the reference where the target jumps (no unique value there) is excused.
CHECK = declared("forward", replay=forward, replay_helpers=(not_finite, by_own_error),
                 stages=(Stage(observe=_observer, excuses=(Kink(AGAINST, anywhere=True, values=True,
                                                                with_reference=True),)),))

"""``dtype``: in each dtype, forward and backward run, dtypes follow the input, values track float64 (complex128
for a complex dtype)."""

from __future__ import annotations

import contextlib
import functools

from audit.checks import reference, smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.contract import REAL_PART, real_counterpart, widest_of
from audit.toolkit import rounding
from audit.toolkit.jacobian import gradcheck_values, wrap
from audit.toolkit.tensors import floating, grad_inputs, vjp, wide



def run(subject, case) -> None:
    """Outputs and gradients in the input's dtype, close to float64 on the same (rounded) inputs."""
    args = subject.args(case)
    outputs, grads = vjp(subject.evaluate, args, grad_inputs(args), subject.seed)
    _output_dtypes(outputs, subject.dtype)
    _gradient_dtypes(grads, grad_inputs(args))
    widened = [wide(a.detach()).requires_grad_(a.requires_grad) if _floating(a) else a for a in args]
    tight = subject.dtype == widest_of(subject.dtype)
    referenced = tight and subject.target.reference is not None and subject.reference_draws_alike(case)
    baseline_fn = subject.evaluate_reference if referenced else subject.evaluate
    with reference.blamed() if referenced else contextlib.nullcontext():
        expected, expected_grads = vjp(baseline_fn, widened, grad_inputs(widened), subject.seed)
    if referenced:  # where the reference is undefined, the target's gradient is judged by finite differences
        expected = reference.outputs_defined(subject, case, "dtype (against the reference)", outputs, expected)
        expected_grads = reference.gradients_defined(subject, case, "dtype (against the reference)",
                                                     wrap(subject, widened), grad_inputs(widened), grads, expected_grads)
    against = "the reference" if referenced else widest_of(subject.dtype)
    largest = functools.cache(lambda: rounding.largest_value(  # measured once, and only when a comparison needs it
        lambda: vjp(baseline_fn, widened, grad_inputs(widened), subject.seed)))
    for label, got, want, values in (("output", outputs, expected, True),
                                     ("gradient of input", grads, expected_grads, False)):
        try:
            rounding.compare_rounded(label, got, want, subject.tolerance(tight=tight), largest)
        except Violation as exc:
            if referenced and not values and _reference_unreliable(subject, case, widened):
                return
            if smoothness.excused_anywhere(subject, f"dtype ({label}s against {against})", case,
                                           wrap(subject, widened), grad_inputs(widened), values=values):
                return
            raise Violation(f"{exc} (in {subject.dtype}, against {against})") from None


def _reference_unreliable(subject, case, widened) -> bool:
    """Whether the reference's own gradient fails finite differences here (then the target's is judged by them
    instead: a :class:`Violation` where they disagree at a smooth point)."""
    check = "dtype (against the reference)"
    if not reference.unreliable(subject, case, check, widened):
        return False
    reference.judge_by_differences(subject, case, check, wrap(subject, widened), grad_inputs(widened))
    return True


def _floating(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and floating(value)


def _output_dtypes(outputs, dtype: str) -> None:
    """Each floating output in ``dtype``'s precision: ``dtype`` itself, or its complex or real counterpart (an rfft
    of float32 gives complex64, an abs of complex128 float64)."""
    for i, t in enumerate(outputs):
        name = str(t.dtype).replace("torch.", "")
        if floating(t) and real_counterpart(name) != real_counterpart(dtype):
            raise Violation(f"output {i} is {name} for {dtype} inputs: expected {dtype}{_or_counterpart(dtype)} "
                            "(compute in the input's dtype, or cast back before returning)")


def _gradient_dtypes(grads, inputs) -> None:
    """Each gradient in its own input's dtype: the cell's, or the one the registry pins (a complex128 input of a
    float64 cell gets a complex128 gradient)."""
    for i, (grad, x) in enumerate(zip(grads, inputs)):
        if grad.dtype != x.dtype:
            got, want = (str(t).replace("torch.", "") for t in (grad.dtype, x.dtype))
            raise Violation(f"gradient of input {i} is {got} for {want} inputs: expected {want} (compute in the "
                            "input's dtype, or cast back before returning)")


def _or_counterpart(dtype: str) -> str:
    """The other dtype of the same precision an output may have: its complex or its real counterpart."""
    twin = {real: complex_ for complex_, real in REAL_PART.items()}.get(dtype) or REAL_PART.get(dtype)
    return f" or {twin}" if twin else ""


CHECK = declared(
    "dtype",
    run=run,
    script_values=gradcheck_values,
    script="""\
outs, gs = grads(fn, args)
widened = [wide(a.detach()).requires_grad_(a.requires_grad) if torch.is_tensor(a) and floating(a) else a
        for a in args]
base = ref if ref is not None and dtype in (torch.float64, torch.complex128) else fn  # widest: against the reference
wide_outs, wide_gs = grads(base, widened)
# gradients in the input's dtype; outputs in its precision (a real input may give a complex output: rfft)
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]  # each gradient in its input's dtype
failed = any(g.dtype != x.dtype for g, x in zip(gs, diff)) or any(t.dtype.to_real() != dtype.to_real() for t in outs)
if failed:
    print("dtypes:", [t.dtype for t in outs], [t.dtype for t in gs], "for", dtype, "inputs")
if base is ref:  # where the reference is NaN or inf and the target finite: no comparison
    wide_outs = defined_only(outs, wide_outs)
if base is ref and any(undefined_where(g, e).any() for g, e in zip(gs, wide_gs)):
    # there the target's gradient is judged by finite differences instead
    wide_diff = [a for a in widened if torch.is_tensor(a) and a.requires_grad]
    def at(*xs):
        it = iter(xs)
        found = tensors_of(fn(*[next(it) if torch.is_tensor(a) and a.requires_grad else a for a in widened]))
        return tuple(o for o in found if floating(o))
    if not torch.autograd.gradcheck(at, wide_diff, raise_exception=False, **options):
        print("the reference is undefined here, and the target's gradient disagrees with finite differences")
        failed = True
    wide_gs = defined_only(gs, wide_gs)
# float16, bfloat16: scale applies to the largest value the float64 run passes through (operands, intermediates)
magnitude = largest_value(lambda: grads(base, widened)) if scale else 0.0
failed |= differs("output vs the widest dtype", outs, wide_outs, magnitude=magnitude)
failed |= differs("gradient vs the widest dtype", gs, wide_gs, magnitude=magnitude)
sys.exit(1 if failed else 0)
""",
)

"""``dtype``: in each dtype, forward and backward run, dtypes follow the input, values track float64."""

from __future__ import annotations

from audit.checks.catalog import declared
from audit.checks import rounding, smoothness
from audit.checks.interface import Violation
from audit.checks.jacobian import wrap
from audit.checks.subject import grad_inputs
from audit.checks.tensors import vjp



def run(subject, case) -> None:
    """Outputs and gradients in the input's dtype, close to float64 on the same (rounded) inputs."""
    args = subject.args(case)
    outputs, grads = vjp(subject.evaluate, args, grad_inputs(args), subject.seed)
    _dtypes("output", outputs, subject.dtype, floating_only=True)
    _dtypes("gradient of input", grads, subject.dtype)
    wide = [a.detach().double().requires_grad_(a.requires_grad) if _floating(a) else a for a in args]
    tight = subject.dtype == "float64"
    referenced = tight and subject.target.reference is not None
    baseline_fn = subject.evaluate_reference if referenced else subject.evaluate
    expected, expected_grads = vjp(baseline_fn, wide, grad_inputs(wide), subject.seed)
    against = "the reference" if referenced else "float64"
    largest = rounding.once(lambda: rounding.largest_value(lambda: vjp(baseline_fn, wide, grad_inputs(wide), subject.seed)))
    for label, got, want, values in (("output", outputs, expected, True),
                                     ("gradient of input", grads, expected_grads, False)):
        try:
            rounding.compare_rounded(label, got, want, subject.tolerance(tight=tight), largest)
        except Violation as exc:
            if smoothness.excused_anywhere(subject, f"dtype ({label}s against {against})", case,
                                           wrap(subject, wide), grad_inputs(wide), values=values):
                return
            raise Violation(f"{exc} (in {subject.dtype}, against {against})") from None


def _floating(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and value.is_floating_point()


def _dtypes(label, tensors, dtype: str, floating_only: bool = False) -> None:
    for i, t in enumerate(tensors):
        if floating_only and not t.is_floating_point():
            continue
        if str(t.dtype) != f"torch.{dtype}":
            raise Violation(f"{label} {i} is {str(t.dtype).replace('torch.', '')} for {dtype} inputs: "
                            f"expected {dtype} (compute in the input's dtype, or cast back before returning)")


CHECK = declared(
    "dtype",
    run=run,
    script="""\
outs, gs = grads(fn, args)
wide = [a.detach().double().requires_grad_(a.requires_grad) if torch.is_tensor(a) and a.is_floating_point() else a
        for a in args]
base = ref if ref is not None and dtype == torch.float64 else fn  # in float64: against the reference
wide_outs, wide_gs = grads(base, wide)
failed = any(t.dtype != dtype for t in outs + gs)
if failed:
    print("dtypes:", [t.dtype for t in outs], [t.dtype for t in gs], "for", dtype, "inputs")
# float16, bfloat16: scale applies to the largest value the float64 run passes through (operands, intermediates)
magnitude = largest(lambda: grads(base, wide)) if scale else 0.0
failed |= differs("output vs float64", outs, wide_outs, magnitude=magnitude)
failed |= differs("gradient vs float64", gs, wide_gs, magnitude=magnitude)
sys.exit(1 if failed else 0)
""",
)

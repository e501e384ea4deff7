"""``dtype``: in each dtype, forward and backward run, dtypes follow the input, values track float64 (complex128
for a complex dtype)."""

from __future__ import annotations

from audit.checks.catalog import declared
from audit.contract import REAL_PART, real_counterpart, widest_of
from audit.checks import smoothness
from audit.checks.interface import Violation
from audit.checks.jacobian import wrap
from audit.checks.subject import grad_inputs
from audit.checks.tensors import compare_all, floating, vjp, wide



def run(subject, case) -> None:
    """Outputs and gradients in the input's dtype, close to float64 on the same (rounded) inputs."""
    args = subject.args(case)
    outputs, grads = vjp(subject.evaluate, args, grad_inputs(args), subject.seed)
    _dtypes("output", outputs, subject.dtype, floating_only=True)
    _dtypes("gradient of input", grads, subject.dtype)
    widened = [wide(a.detach()).requires_grad_(a.requires_grad) if _floating(a) else a for a in args]
    tight = subject.dtype == widest_of(subject.dtype)
    referenced = tight and subject.target.reference is not None
    baseline_fn = subject.evaluate_reference if referenced else subject.evaluate
    expected, expected_grads = vjp(baseline_fn, widened, grad_inputs(widened), subject.seed)
    against = "the reference" if referenced else widest_of(subject.dtype)
    for label, got, want, values in (("output", outputs, expected, True),
                                     ("gradient of input", grads, expected_grads, False)):
        try:
            compare_all(label, got, want, subject.tolerance(tight=tight))
        except Violation as exc:
            if smoothness.excused_anywhere(subject, f"dtype ({label}s against {against})", case,
                                           wrap(subject, widened), grad_inputs(widened), values=values):
                return
            raise Violation(f"{exc} (in {subject.dtype}, against {against})") from None


def _floating(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor) and floating(value)


def _dtypes(label, tensors, dtype: str, floating_only: bool = False) -> None:
    """Each tensor in ``dtype``; an output (``floating_only``) may also be complex for a real ``dtype`` or real for a
    complex one (rfft, abs), in the same precision: complex64 goes with float32, complex128 with float64."""
    for i, t in enumerate(tensors):
        if floating_only and not floating(t):
            continue
        name = str(t.dtype).replace("torch.", "")
        same = real_counterpart(name) == real_counterpart(dtype) if floating_only else name == dtype
        if not same:
            raise Violation(f"{label} {i} is {name} for {dtype} inputs: expected {dtype}"
                            f"{_or_counterpart(dtype) if floating_only else ''} (compute in the input's dtype, or "
                            "cast back before returning)")


def _or_counterpart(dtype: str) -> str:
    """The other dtype of the same precision an output may have: its complex or its real counterpart."""
    twin = {real: complex_ for complex_, real in REAL_PART.items()}.get(dtype) or REAL_PART.get(dtype)
    return f" or {twin}" if twin else ""


CHECK = declared(
    "dtype",
    run=run,
    script="""\
outs, gs = grads(fn, args)
widened = [wide(a.detach()).requires_grad_(a.requires_grad) if torch.is_tensor(a) and floating(a) else a
        for a in args]
base = ref if ref is not None and dtype in (torch.float64, torch.complex128) else fn  # widest: against the reference
wide_outs, wide_gs = grads(base, widened)
# gradients in the input's dtype; outputs in its precision (a real input may give a complex output: rfft)
failed = any(t.dtype != dtype for t in gs) or any(t.dtype.to_real() != dtype.to_real() for t in outs)
if failed:
    print("dtypes:", [t.dtype for t in outs], [t.dtype for t in gs], "for", dtype, "inputs")
failed |= differs("output vs the widest dtype", outs, wide_outs)
failed |= differs("gradient vs the widest dtype", gs, wide_gs)
sys.exit(1 if failed else 0)
""",
)

"""``forward``: the target runs, returns finite values for finite inputs, and matches its reference."""

from __future__ import annotations

import torch

from audit.checks import reference, smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.contract import widest_of
from audit.toolkit import rounding
from audit.toolkit.jacobian import wrap
from audit.toolkit.tensors import dense, floating, grad_inputs, outputs_of


def run(subject, case) -> None:
    """Outputs match the reference (computed in float64) within the dtype's tolerance."""
    args = subject.args(case)
    with torch.no_grad():
        outputs = outputs_of(subject.call(args))
    if subject.target.reference is None or not subject.reference_draws_alike(case):
        _finite(outputs, args)
        return
    with torch.no_grad(), reference.blamed():
        expected = outputs_of(subject.evaluate_reference(*subject.args(case, widest_of(subject.dtype))))
    tight = subject.dtype == widest_of(subject.dtype)
    widest = lambda: subject.args(case, widest_of(subject.dtype))  # noqa: E731 - built only if measured
    expected = [e.to(o.dtype) if not tight else e for o, e in zip(outputs, expected)]
    expected = reference.outputs_defined(subject, case, "forward (against the reference)", outputs, expected)
    try:
        rounding.compare_rounded("output", outputs, expected,
                                 subject.tolerance(tight=tight), lambda: rounding.largest_value(lambda: _call(subject, widest())))
    except Violation:
        if not smoothness.excused_anywhere(subject, "forward (against the reference)", case, wrap(subject, args),
                                           grad_inputs(args), values=True):
            raise


def _call(subject, args):
    with torch.no_grad():
        return subject.call(args)


def _finite(outputs, args) -> None:
    if any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args):
        return  # reductions over nothing may be infinite by definition (logsumexp of [] is -inf)
    for i, out in enumerate(dense(o) for o in outputs):  # a sparse output: its values, zeros elsewhere
        if floating(out) and not torch.isfinite(out).all():
            index = tuple(int(k) for k in (~torch.isfinite(out)).nonzero()[0])
            raise Violation(f"output {i} is not finite at index {index} ({out[index].item()}) "
                            "although every input is finite and inside its domain")


CHECK = declared(
    "forward",
    run=run,
    script="""\
with torch.no_grad():
    out = fn(*args)
outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(o)]
failed = False
if ref is not None:  # against the reference, computed in float64 (complex128 for complex)
    with torch.no_grad():
        expected = ref(*[wide(a.detach()) if torch.is_tensor(a) and floating(a) else a for a in args])
    exps = [e for e in (expected if isinstance(expected, (tuple, list)) else (expected,)) if torch.is_tensor(e)]
    # float16, bfloat16: scale applies to the largest value the target passes through in float64
    magnitude = largest_value(lambda: fn(*[wide(a.detach()) if torch.is_tensor(a) and floating(a) else a
                                     for a in args])) if scale else 0.0
    if dtype not in (torch.float64, torch.complex128):  # a float64 cell compares in float64, whatever the output's dtype
        exps = [e.to(o.dtype) for o, e in zip(outs, exps)]
    exps = defined_only(outs, exps)  # where the reference is NaN or inf and the target finite: not compared
    failed = differs("output", outs, exps, magnitude=magnitude)
elif not any(torch.is_tensor(a) and a.numel() == 0 for a in args):  # finite inputs, finite outputs
    for i, o in enumerate(outs):
        o = o.to_dense() if o.layout != torch.strided else o  # a sparse output: its values, zeros elsewhere
        if floating(o) and not torch.isfinite(o).all():
            print(f"output {i} is not finite:", o)
            failed = True
print("FAILS" if failed else "holds")
sys.exit(1 if failed else 0)
""",
)

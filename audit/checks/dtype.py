"""``dtype``: in each dtype, forward and backward run, dtypes follow the input, values track float64 (complex128
for a complex dtype)."""

from __future__ import annotations

import torch

from audit.checks import reference, replayable, smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.kit import (NO_GRADIENT_OUTPUT, defined_only, floating, grad_inputs, judged_by_differences, largest_value,
                       once, outputs_and_gradients, rounded_mismatches, undefined_where, wide, wrapped)
from audit.toolkit.jacobian import gradcheck_values, wrap

#: The check a comparison with the reference is told as (the property's lines say it again: the replay script
#: carries the property, not this module).
AGAINST = "dtype (against the reference)"


def dtype_check(fn, ref, args, *, seed, dtype, tol, options, observe=None) -> list:
    """(Not named ``dtype``: the script's ``dtype`` is the cell's.) Outputs and gradients in the input's dtype
    (:func:`kept_dtypes`), then close within ``tol`` to the same computation on the inputs widened to float64
    (complex128 for complex): the reference's in a float64 or complex128 cell that has one, else the target's own
    (:func:`widest_run`). Where the reference's gradient is undefined, the target's is judged by finite differences
    with ``options`` instead (``observe`` is told where the reference is undefined)."""
    outputs, grads = outputs_and_gradients(fn, args, seed)
    found = kept_dtypes(outputs, grads, args, dtype)
    if found:
        return found
    wider = widest_run(fn, ref, args, seed, dtype)
    return (judged_where_undefined(fn, grads, wider, options)
            or widest_mismatches("output", outputs, wider, dtype, tol, observe)
            or widest_mismatches("gradient of input", grads, wider, dtype, tol, observe))


def kept_dtypes(outputs, grads, args, dtype) -> list:
    """Each differentiable output in ``dtype``'s precision (``dtype`` itself, or its complex or real counterpart:
    an rfft of float32 gives complex64, an abs of complex128 float64), and each gradient in its own input's dtype
    (the cell's, or the one the registry pins)."""
    if not outputs:
        return [NO_GRADIENT_OUTPUT]
    name = str(dtype).replace("torch.", "")
    for i, t in enumerate(outputs):
        if floating(t) and t.dtype.to_real() != dtype.to_real():
            return [f"output {i} is {str(t.dtype).replace('torch.', '')} for {name} inputs: expected "
                    f"{name}{_or_counterpart(dtype)} (compute in the input's dtype, or cast back before returning)"]
    for i, (grad, x) in enumerate(zip(grads, grad_inputs(args))):
        if grad.dtype != x.dtype:
            got, want = (str(t).replace("torch.", "") for t in (grad.dtype, x.dtype))
            return [f"gradient of input {i} is {got} for {want} inputs: expected {want} (compute in the input's "
                    "dtype, or cast back before returning)"]
    return []


def _or_counterpart(dtype) -> str:
    """The other dtype of the same precision an output may have: its complex or its real counterpart."""
    twin = {torch.float64: torch.complex128, torch.float32: torch.complex64, torch.complex128: torch.float64,
            torch.complex64: torch.float32}.get(dtype)
    return f" or {str(twin).replace('torch.', '')}" if twin else ""


def widest_run(fn, ref, args, seed: int, dtype):
    """What the cell's results are compared with: (whom: "the reference" or the widest dtype's name, the widened
    arguments, their outputs, their gradients, the largest value that computation passes through as a callable
    measured once). The reference runs in a float64 or complex128 cell that has one, else the target itself."""
    widened = widened_leaves(args)
    referenced = ref is not None and dtype in (torch.float64, torch.complex128)
    baseline = ref if referenced else fn
    expected, expected_grads = outputs_and_gradients(baseline, widened, seed)
    largest = once(lambda: largest_value(lambda: outputs_and_gradients(baseline, widened, seed)))
    whom = "the reference" if referenced else ("complex128" if dtype.is_complex else "float64")
    return whom, widened, expected, expected_grads, largest


def widened_leaves(args) -> list:
    """``args`` with each floating tensor a new leaf in float64 (complex128 for complex), requiring grad as it did."""
    return [wide(a.detach()).requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) and floating(a) else a
            for a in args]


def judged_where_undefined(fn, grads, wider, options) -> list:
    """Where the reference's gradient is NaN or inf and the target's (``grads``) finite, the target's gradient
    judged by finite differences (torch's gradcheck with ``options``) at the widened arguments."""
    whom, widened, _, expected_grads, _ = wider
    if whom != "the reference" or not any(undefined_where(g, e).any() for g, e in zip(grads, expected_grads)):
        return []
    return judged_by_differences("dtype (against the reference)", wrapped(fn, widened), grad_inputs(widened),
                                 options)


def widest_mismatches(label: str, got, wider, dtype, tol, observe=None) -> list:
    """``got`` (the outputs, or the gradients: ``label``) against the widened run's within ``tol`` (float16,
    bfloat16: at the scale of the largest value it passes through, where larger); against the reference, only
    where it is defined (``observe`` is told where not)."""
    whom, _, expected, expected_grads, largest = wider
    want = expected if label == "output" else expected_grads
    if whom == "the reference":
        want = defined_only(got, want, observe, label)
    name = str(dtype).replace("torch.", "")
    return [f"{line} (in {name}, against {whom})" for line in rounded_mismatches(label, got, want, tol, largest)]


def run(subject, case) -> None:
    """:func:`dtype_check` stage by stage, each failure excused on its own terms: where the target has no
    derivative (or no unique value), or, for gradients, where the reference's own is off finite differences."""
    values = replayable.values(CHECK, subject, case)
    fn, ref, args = replayable.target(subject), replayable.compared_reference(subject, case), subject.args(case)
    outputs, grads = outputs_and_gradients(fn, args, subject.seed)
    _hold(kept_dtypes(outputs, grads, args, values["dtype"]))
    with reference.blamed_if_it_raises(subject, lambda: widened_leaves(subject.args(case))):
        wider = widest_run(fn, ref, args, subject.seed, values["dtype"])
    whom, widened = wider[:2]
    at, inputs = wrap(subject, widened), grad_inputs(widened)
    found = judged_where_undefined(fn, grads, wider, values["options"])
    if found and not smoothness.excused(subject, AGAINST, case, at, inputs, values["options"]["eps"]):
        raise Violation(found[0])
    observe = _observer(subject, case)
    for label, got in (("output", outputs), ("gradient of input", grads)):
        found = widest_mismatches(label, got, wider, values["dtype"], values["tol"], observe)
        if not found:
            continue
        if whom == "the reference" and label != "output" and _reference_unreliable(subject, case, widened):
            return
        if smoothness.excused_anywhere(subject, f"dtype ({label}s against {whom})", case, at, inputs,
                                       values=label == "output"):
            return
        raise Violation(found[0])


def _hold(found: list) -> None:
    """A :class:`Violation` with the first of ``found``, if any."""
    if found:
        raise Violation(found[0])


def _observer(subject, case):
    """An ``observe`` for :func:`widest_mismatches`: where the reference is undefined, its outputs are not compared,
    and its gradients have been judged by finite differences."""
    said = {"output": replayable.observer(subject, case, AGAINST),
            "gradient of input": replayable.observer(subject, case, AGAINST, "the target's gradient judged by finite "
                                                                             "differences (gradcheck)")}
    return lambda label, *seen: said[label](label, *seen)


def _reference_unreliable(subject, case, widened) -> bool:
    """Whether the reference's own gradient fails finite differences here (then the target's is judged by them
    instead: a :class:`Violation` where they disagree at a smooth point)."""
    if not reference.unreliable(subject, case, AGAINST, widened):
        return False
    reference.judge_by_differences(subject, case, AGAINST, wrap(subject, widened), grad_inputs(widened))
    return True


CHECK = declared("dtype", run=run, replay=dtype_check, script_values=gradcheck_values,
                 replay_helpers=(kept_dtypes, _or_counterpart, widened_leaves, widest_run, judged_where_undefined,
                                 widest_mismatches))

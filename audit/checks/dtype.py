"""``dtype``: in each dtype, forward and backward run, dtypes follow the input, values track a wider computation:
the reference's in float64 (complex128), judged by the precision's own error in half precision, or the target's own
in its most precise claimed dtype. The target is never run in a dtype it does not claim."""

from __future__ import annotations

from contextlib import contextmanager

import torch

from audit.checking import judgement, reference, replayable, smoothness
from audit.catalog.checks import declared
from audit.checking.judgement import UnreliableReference
from audit.catalog.interface import Violation
from audit.kit.refusal import NotApplicable
from audit.kit.autograd import NO_GRADIENT_OUTPUT, call_vjp, grad_inputs, wrapped
from audit.kit.calls import once
from audit.kit.compare import defined_only, undefined_where
from audit.kit.explain import first_line, judged_by_differences, user_site
from audit.kit.noise import measured_noise, noisy_mismatches
from audit.kit.precision import (largest_input, largest_value, leaves_in, own_error_mismatches, rounded_mismatches,
                                 three_runs, value_range)
from audit.kit.proxy import declared_vjp_mismatches, proxy_mismatches
from audit.kit.tensors import floating
from audit.toolkit.jacobian import gradcheck_values, wrap

#: The check a comparison with the reference is told as (the property's lines say it again: the replay script
#: carries the property, not this module).
AGAINST = "dtype (against the reference)"
#: Why a lower-precision cell cannot judge values: nothing wider to compare them with.
NOTHING_WIDER = ("outputs and gradients keep the input's dtype, but their values are not judged: there is no "
                 "reference and no more precise claimed dtype to compare them with, and the target is never run in "
                 "a dtype it does not claim (add a reference, or claim float32 or float64)")


def dtype_check(fn, ref, args, *, seed, dtype, tol, options, own_error=False, wider_dtype=None, ratios=None,
                observe=None, proxy=None, proxy_name="", declared_vjp=None, vjp_name="") -> list:
    """(Not named ``dtype``: the script's ``dtype`` is the cell's.) Outputs and gradients in the input's dtype
    (:func:`kept_dtypes`), then their values: in a cell judged by the precision's own error (``own_error``) with a
    reference, by :func:`by_own_error`; else close within ``tol`` to a wider computation (:func:`widest_run`).
    Where the reference's gradient is undefined, the target's is judged by finite differences with ``options``
    instead (``observe`` is told where the reference is undefined). With a declared ``proxy``, the gradients'
    values are judged against the proxy's float64 autograd gradient alone (:func:`audit.kit.proxy.proxy_mismatches`;
    the outputs' are the forward check's, in every claimed dtype); with a declared VJP (``declared_vjp``), against its
    gradients in float64 on drawn cotangents alone (:func:`audit.kit.proxy.declared_vjp_mismatches`)."""
    outputs, grads = call_vjp(fn, args, seed)
    found = kept_dtypes(outputs, grads, args, dtype)
    if found:
        return found
    if declared_vjp is not None:
        return [line.worded(f"{line} (in {str(dtype).replace('torch.', '')})") for line in
                declared_vjp_mismatches(fn, declared_vjp, args, seed, tol, dtype, own_error, ratios, vjp_name)]
    if proxy is not None:  # worded, so each keeps its kind: not the intended gradient
        return [line.worded(f"{line} (in {str(dtype).replace('torch.', '')})")
                for line in proxy_mismatches(fn, proxy, args, seed, tol, dtype, own_error, ratios, proxy_name)]
    if own_error and ref is not None:
        return by_own_error(fn, ref, args, seed=seed, dtype=dtype, ratios=ratios)
    wider = widest_run(fn, ref, args, seed, dtype, wider_dtype)
    if wider is None:
        return []
    return (judged_where_undefined(fn, grads, wider, options)
            or widest_mismatches("output", outputs, wider, dtype, tol, observe)
            or widest_mismatches("gradient of input", grads, wider, dtype, tol, observe))


def by_own_error(fn, ref, args, *, seed, dtype, ratios=None) -> list:
    """Outputs, then gradients (cotangents drawn from ``seed``, rounded to ``dtype``) against the truth, the
    reference in float64 on the same rounded inputs, each allowed OWN_ERROR_RATIO times the error of the reference
    run in ``dtype`` itself plus one rounding (:func:`audit.kit.precision.own_error_mismatches`)."""
    got, truth, own = three_runs(fn, ref, args, seed, dtype)
    where, size = value_range(args), largest_input(args)
    return [f"{line} (in {str(dtype).replace('torch.', '')}, against the reference)" for line in
            own_error_mismatches("output", got[0], truth[0], own[0] if own else None, dtype, ratios, where, size)
            or own_error_mismatches("gradient of input", got[1], truth[1], own[1] if own else None, dtype, ratios,
                                    where, size)]


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


def widest_run(fn, ref, args, seed: int, dtype, wider_dtype):
    """What the cell's results are compared with: (whom: "the reference" or the dtype's name, the wider arguments,
    their outputs, their gradients, the largest value that computation passes through and its sensitivity, each a
    callable measured once when asked); None when there is nothing wider. The reference runs in float64
    (complex128) where the cell is that precise, or where no claimed dtype is more precise than the cell's
    (``wider_dtype`` None); else the target runs in ``wider_dtype``, the most precise dtype it claims: never in one
    it does not."""
    top = dtype in (torch.float64, torch.complex128)
    referenced = ref is not None and (top or wider_dtype is None)
    if not referenced and (top or wider_dtype is None):
        return None  # float64 without a reference: the cell's own run is the widest there is
    baseline = ref if referenced else fn
    leaves = leaves_in(args, torch.float64 if referenced else wider_dtype)
    expected, expected_grads = call_vjp(baseline, leaves, seed)
    largest = once(lambda: largest_value(lambda: call_vjp(baseline, leaves, seed)))
    sensitivity = measured_noise(lambda xs: list(call_vjp(baseline, xs, seed)), leaves)
    whom = "the reference" if referenced else str(wider_dtype).replace("torch.", "")
    return whom, leaves, expected, expected_grads, largest, sensitivity


def judged_where_undefined(fn, grads, wider, options) -> list:
    """Where the reference's gradient is NaN or inf and the target's (``grads``) finite, the target's gradient
    judged by finite differences (torch's gradcheck with ``options``) at the widened arguments, in a cell of their
    dtype only (the target is not run in another)."""
    whom, leaves, _, expected_grads = wider[:4]
    if whom != "the reference" or not any(undefined_where(g, e).any() for g, e in zip(grads, expected_grads)):
        return []
    if any(g.dtype != x.dtype for g, x in zip(grads, grad_inputs(leaves))):
        return []
    return judged_by_differences("dtype (against the reference)", wrapped(fn, leaves), grad_inputs(leaves),
                                 options)


def widest_mismatches(label: str, got, wider, dtype, tol, observe=None, sensitive=False) -> list:
    """``got`` (the outputs, or the gradients: ``label``) against the wider run's within ``tol`` (float16,
    bfloat16: at the scale of the largest value it passes through, where larger); against the reference, only
    where it is defined (``observe`` is told where not), and where the tight tolerance fails, with the reference's
    own sensitivity at the point added: always for outputs, for gradients only when ``sensitive`` (the audit asks
    last, after the reference-unreliable and singular-point excuses)."""
    whom, _, expected, expected_grads, largest, sensitivity = wider
    want = expected if label == "output" else expected_grads
    name = str(dtype).replace("torch.", "")
    if whom == "the reference":  # where tight fails, the reference's own sensitivity at the point is allowed too
        want = defined_only(got, want, observe, label)
    group = 0 if label == "output" else 1
    found = (noisy_mismatches(label, got, want, tol, lambda: sensitivity()[group])
             if whom == "the reference" and (sensitive or label == "output")
             else rounded_mismatches(label, got, want, tol, largest))
    return [f"{line} (in {name}, against {whom})" for line in found]


def run(subject, case) -> None:
    """:func:`dtype_check` stage by stage, each failure excused on its own terms: where the target has no
    derivative (or no unique value), or, for gradients, where the reference's own is off finite differences."""
    values = replayable.values(CHECK, subject, case)
    fn, ref, args = replayable.target(subject), replayable.compared_reference(subject, case), subject.args(case)
    outputs, grads = call_vjp(fn, args, subject.seed)
    judgement.settle(subject, case, kept_dtypes(outputs, grads, args, values["dtype"]))
    if subject.entry.proxy or subject.entry.vjp:
        judgement.settle(subject, case, replayable.problems(CHECK, subject, case))
        return
    if values["own_error"] and ref is not None:
        with reference.blamed_if_it_raises(subject, lambda: subject.args(case)):
            found = replayable.stage(CHECK, by_own_error, subject, case)
        judgement.settle(subject, case, found, (UnreliableReference(AGAINST),))
        return
    guard = (reference.blamed_if_it_raises(subject, lambda: leaves_in(subject.args(case), torch.float64))
             if ref is not None else _wider_run_raises(values["wider_dtype"], values["dtype"]))
    with guard:
        wider = widest_run(fn, ref, args, subject.seed, values["dtype"], values["wider_dtype"])
    if wider is None:
        if values["dtype"] in (torch.float64, torch.complex128):
            return
        raise NotApplicable(NOTHING_WIDER)
    _judge_values(subject, case, values, (outputs, grads), wider)


@contextmanager
def _wider_run_raises(wider_dtype, dtype):
    """Without a reference the wider run is the target's own, in ``wider_dtype``: an exception there is the target's,
    said so (never a reference's: the entry has none to blame)."""
    try:
        yield
    except (MemoryError, RecursionError, Violation):
        raise
    except Exception as exc:
        wide, name = (str(d).replace("torch.", "") for d in (wider_dtype, dtype))
        raise Violation(f"the target raised {type(exc).__name__} in {wide}: {first_line(exc)}{user_site(exc)} (its "
                        f"{wide} run is what this {name} cell's values are compared with; the {wide} cell meets it "
                        "too)") from exc


def _judge_values(subject, case, values, results, wider) -> None:
    """The stages of :func:`dtype_check` after the dtypes, on the cell's ``results`` (outputs, gradients) against
    ``wider`` (:func:`widest_run`); finite differences and singularity probes of the target run where it is claimed:
    at the wider arguments when they are in a claimed dtype, else at the cell's own."""
    fn, (outputs, grads) = replayable.target(subject), results
    whom, leaves = wider[:2]
    claimed = whom != "the reference" or values["dtype"] in (torch.float64, torch.complex128)
    probed = leaves if claimed else subject.args(case)
    at, inputs = wrap(subject, probed), grad_inputs(probed)
    found = judged_where_undefined(fn, grads, wider, values["options"])
    if found and not smoothness.excused(subject, AGAINST, case, at, inputs, values["options"]["eps"]):
        raise Violation(found[0])
    observe = _observer(subject, case)
    for label, got in (("output", outputs), ("gradient of input", grads)):
        found = widest_mismatches(label, got, wider, values["dtype"], values["tol"], observe)
        if not found:
            continue
        if whom == "the reference" and label != "output" and _reference_unreliable(subject, case, leaves, probed):
            return
        if smoothness.excused_anywhere(subject, f"dtype ({label}s against {whom})", case, at, inputs,
                                       values=label == "output"):
            return
        found = widest_mismatches(label, got, wider, values["dtype"], values["tol"], sensitive=True)  # ill-conditioned
        if found:
            raise Violation(found[0])


def _observer(subject, case):
    """An ``observe`` for :func:`widest_mismatches`: where the reference is undefined, its outputs are not compared,
    and its gradients have been judged by finite differences."""
    said = {"output": replayable.observer(subject, case, AGAINST),
            "gradient of input": replayable.observer(subject, case, AGAINST, "the target's gradient judged by finite "
                                                                             "differences (gradcheck)")}
    return lambda label, *seen: said[label](label, *seen)


def _reference_unreliable(subject, case, leaves, probed) -> bool:
    """Whether the reference's own gradient fails finite differences at ``leaves`` (then the target's is judged by
    them instead, at ``probed``: a :class:`Violation` where they disagree at a smooth point)."""
    if not reference.unreliable(subject, case, AGAINST, leaves):
        return False
    reference.judge_by_differences(subject, case, AGAINST, wrap(subject, probed), grad_inputs(probed))
    return True


CHECK = declared("dtype", run=run, replay=dtype_check, script_values=gradcheck_values,
                 replay_helpers=(kept_dtypes, _or_counterpart, by_own_error, widest_run, judged_where_undefined,
                                 widest_mismatches))

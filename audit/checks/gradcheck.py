"""``gradcheck``: the analytic gradient equals finite differences and, given a reference, its gradient."""

from __future__ import annotations

from functools import partial

import torch

from audit.checking import judgement, reference, replayable, smoothness
from audit.catalog.checks import declared
from audit.checking.judgement import Kink, UnreliableReference
from audit.kit.refusal import NotApplicable
from audit.core.contract import LOW_PRECISION_DTYPES
from audit.kit.autograd import GradcheckError, differentiable, grad_inputs, grad_outputs, gradients, module_of, wrapped
from audit.kit.calls import guarded
from audit.kit.compare import Finding, defined_only, mismatches
from audit.kit.explain import explain_gradcheck_failure
from audit.kit.jacobians import DIFFERENCE_COLUMNS, DIFFERENCE_STEPS
from audit.kit.noise import measured_noise, noisy_mismatches
from audit.kit.precision import largest_input, own_error_mismatches, three_runs, value_range
from audit.kit.proxy import declared_vjp_mismatches, in_mode, proxy_mismatches
from audit.kit.sparse import sparse_gradient_problems
from audit.kit.tensors import dense, detached, floating, fresh, outputs_of, wide
from audit.toolkit.jacobian import gradcheck_options, gradcheck_values, wrap

#: The check the reference stage's failures and notes are told as.
AGAINST = "gradcheck (against the reference)"
#: Why a half-precision cell without a reference has nothing to judge its gradient by.
NO_FINITE_DIFFERENCES = ("finite differences in {dtype} are rounding noise (a step below one ulp changes nothing), "
                         "and the target is never run in a dtype it does not claim: add a reference (plain torch), "
                         "and the gradient is compared with the reference's float64 autograd gradient by the error "
                         "the reference itself makes in {dtype}")


def gradcheck(fn, ref, args, *, seed, tol, options, dtype, own_error=False, parameter_options=None, ratios=None,
              observe=None, proxy=None, proxy_name="", modes=None, via_backward=False, declared_vjp=None,
              vjp_name="") -> list:
    """torch's gradcheck of the target with the audit's ``options`` for the cell (slow mode on small inputs), a
    sparse input's gradient first held to its layout and pattern; for a module, with respect to its parameters
    too (``parameter_options``); then, with a reference, the gradient against the reference's within ``tol``
    (where the reference's is NaN or inf and the target's finite, gradcheck has judged it; ``observe`` is told),
    or, in a cell judged by the precision's own error (``own_error``), by :func:`against_own_error`. In float16
    and bfloat16 no finite differences are taken: a step below one ulp changes nothing, and they are noise. With a
    declared ``proxy`` (an intended gradient: a surrogate, a straight-through estimator), the gradient is judged
    against the proxy's alone (:func:`against_proxy`), never by finite differences of the forward; with a declared VJP
    (``declared_vjp``: the intended gradient is a rule of its own), against its gradients alone
    (:func:`against_declared_vjp`)."""
    if declared_vjp is not None:
        return (inputs_requiring_grad(fn, ref, args) or sparse_gradients(fn, ref, args, seed=seed, options=options)
                or against_declared_vjp(fn, ref, args, declared_vjp=declared_vjp, seed=seed, tol=tol, dtype=dtype,
                                        own_error=own_error, ratios=ratios, vjp_name=vjp_name))
    if proxy is not None:
        return (inputs_requiring_grad(fn, ref, args) or sparse_gradients(fn, ref, args, seed=seed, options=options)
                or against_proxy(fn, ref, args, proxy=proxy, seed=seed, tol=tol, dtype=dtype, own_error=own_error,
                                 ratios=ratios, proxy_name=proxy_name, modes=modes))
    half = dtype in (torch.float16, torch.bfloat16)
    return (inputs_requiring_grad(fn, ref, args) or sparse_gradients(fn, ref, args, seed=seed, options=options)
            or ([] if half else finite_differences(fn, ref, args, options=options))
            or ([] if half else parameter_backward(fn, ref, args, seed=seed) if via_backward else
                parameter_differences(fn, ref, args, seed=seed, parameter_options=parameter_options))
            or (against_own_error(fn, ref, args, seed=seed, dtype=dtype, ratios=ratios) if own_error else
                against_reference(fn, ref, args, seed=seed, tol=tol, observe=observe)))


def inputs_requiring_grad(fn, ref, args) -> list:
    """A line when no input requires a gradient: there is nothing to check."""
    if grad_inputs(args):
        return []
    return ["no input requires a gradient: mark one tensor input requires_grad: true"]


def sparse_gradients(fn, ref, args, *, seed, options) -> list:
    """With a sparse input (``options["masked"]``): each sparse input's gradient has its layout and no value
    outside its pattern (masked gradcheck alone would accept a dense gradient in fast mode, and autograd accepts
    it anywhere)."""
    if not options.get("masked"):
        return []
    return sparse_gradient_problems(args, gradients(outputs_of(fn(*args)), args, seed))


def finite_differences(fn, ref, args, *, options) -> list:
    """torch's gradcheck with ``options``, its failure located and sized (:func:`explain_gradcheck_failure`)."""
    inputs = grad_inputs(args)
    of_inputs = wrapped(fn, args)
    try:
        torch.autograd.gradcheck(of_inputs, inputs, **options)
    except GradcheckError as exc:
        return [explain_gradcheck_failure(of_inputs, inputs, exc, options)]
    return []


def parameter_differences(fn, ref, args, *, seed, parameter_options=None) -> list:
    """For a module target, torch's gradcheck with respect to its parameters (``parameter_options``: fast mode, its
    tolerances scaled by their size), the inputs fixed and torch's generator reset to ``seed`` at each call; the
    message names the parameter and, located on the full Jacobian, the element.

    Fast mode, whatever their number: slow mode perturbs every parameter element on every example (two forwards
    each: 134 for a 4-8-3 MLP), while one random projection vᵀJu costs two forwards a parameter tensor and
    catches a wrong element with probability one; its size-scaled tolerance keeps the power to (see
    :func:`audit.toolkit.jacobian.gradcheck_options`)."""
    module = module_of(fn)
    names = [name for name, p in module.named_parameters() if p.requires_grad] if module is not None else []
    if not names or parameter_options is None:
        return []
    values = [module.get_parameter(name).detach().clone().requires_grad_() for name in names]
    fixed = tuple(detached(args))

    def by_parameters(*params):
        kept = [o for o in outputs_of(torch.func.functional_call(module, dict(zip(names, params)), fixed))
                if floating(o)]
        return tuple(kept) if len(kept) != 1 else kept[0]

    call = guarded(by_parameters, (), seed)
    try:
        torch.autograd.gradcheck(call, values, **parameter_options)
    except GradcheckError as exc:
        message = explain_gradcheck_failure(call, values, exc, parameter_options)
        for i, name in enumerate(names):
            message = message.replace(f"with respect to input {i}:", f"with respect to parameter {name!r}:")
        return [f"parameters: {message}"]
    return []


def parameter_backward(fn, ref, args, *, seed) -> list:
    """For a module target whose gradients only .backward() takes (``via_backward``): each parameter's ``.grad``
    after backward of <outputs, cotangents drawn from ``seed``>, as training reads it, against central differences
    of <outputs, cotangents> in that parameter (its first DIFFERENCE_COLUMNS elements), within float64's difference
    tolerance; the message names the parameter."""
    module = module_of(fn)
    params = [(name, p) for name, p in module.named_parameters() if p.requires_grad] if module is not None else []
    if not params:
        return []
    outputs = differentiable(outputs_of(fn(*fresh(args))))
    if not outputs:
        return []
    cotangents = grad_outputs(outputs, seed)
    for _, p in params:
        p.grad = None
    torch.autograd.backward(outputs, cotangents)
    analytic = {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().clone() for name, p in params}

    def value() -> float:
        with torch.no_grad():
            found = [o for o in outputs_of(fn(*detached(args))) if floating(o)]
            return sum(float((o.double() * c.double()).sum()) for o, c in zip(found, cotangents))

    for name, p in params:
        eps, tol = DIFFERENCE_STEPS.get(p.dtype, DIFFERENCE_STEPS[torch.float64])
        flat = p.data.view(-1)
        for e in range(min(flat.numel(), DIFFERENCE_COLUMNS)):
            kept = float(flat[e])
            flat[e] = kept + eps
            plus = value()
            flat[e] = kept - eps
            minus = value()
            flat[e] = kept
            numeric, got = (plus - minus) / (2 * eps), float(analytic[name].view(-1)[e])
            if abs(got - numeric) > tol.atol + tol.rtol * abs(numeric):
                return [f"parameters: gradient of parameter {name!r} at flat index {e}: .grad after backward "
                        f"{got:.6g}, central differences {numeric:.6g} (allowed atol {tol.atol:g} + rtol "
                        f"{tol.rtol:g}·|numeric|)"]
    return []


def against_proxy(fn, ref, args, *, proxy, seed, tol, dtype, own_error=False, ratios=None, proxy_name="",
                  modes=None) -> list:
    """The target's gradients (cotangents drawn from ``seed``) against the declared proxy's float64 autograd
    gradients within ``tol``, or by the error the proxy itself makes in ``dtype`` (``own_error``), in each of a module
    target's ``modes`` (train, eval: a surrogate switched off in one fails naming it)
    (:func:`audit.kit.proxy.proxy_mismatches`)."""
    for mode in modes or [None]:
        with in_mode(fn, mode):
            found = proxy_mismatches(fn, proxy, args, seed, tol, dtype, own_error, ratios, proxy_name)
        if found and mode is not None:
            return [Finding(f"{line} (the module in {mode}())", f"{line.kind} in {mode}()") for line in found]
        if found:
            return found
    return []


def against_declared_vjp(fn, ref, args, *, declared_vjp, seed, tol, dtype, own_error=False, ratios=None,
                         vjp_name="") -> list:
    """The target's gradients against the declared VJP's, computed in float64 on the same values, on seeded random
    cotangents, all zeros and a non-contiguous layout, within ``tol`` or by the error the VJP itself makes in
    ``dtype`` (``own_error``) (:func:`audit.kit.proxy.declared_vjp_mismatches`)."""
    return declared_vjp_mismatches(fn, declared_vjp, args, seed, tol, dtype, own_error, ratios, vjp_name)


def against_reference(fn, ref, args, *, seed, tol, observe=None, sensitive=False) -> list:
    """With a reference, the target's gradient (cotangents drawn from ``seed``) against the reference's within
    ``tol``, where the reference's is defined (elsewhere gradcheck, which held, has judged the target's);
    ``sensitive``: where that fails, again with the reference's own sensitivity at the point added
    (:func:`audit.kit.noise.noisy_mismatches`: its gradient's spread over steps of a few dozen ulps of the inputs, large
    only where the point is ill-conditioned)."""
    if ref is None:
        return []
    got, expected = reference_gradients(fn, ref, args, seed)
    expected = defined_only(got, expected, observe, "gradient of input")
    found = mismatches("gradient of input", got, expected, tol)
    if found and sensitive:
        spread = measured_noise(lambda xs: [gradients(outputs_of(ref(*xs)), xs, seed)], fresh(args))
        found = noisy_mismatches("gradient of input", got, expected, tol, lambda: spread()[0])
    return [f"{line} against the reference's autograd gradient (vjp with random cotangents); a backward computed "
            "in lower precision than its input passes finite differences but not this" for line in found]


def against_own_error(fn, ref, args, *, seed, dtype, ratios=None) -> list:
    """With a reference, the target's gradients (cotangents drawn from ``seed``, rounded to ``dtype``) against the
    truth, the reference's autograd gradients in float64 on the same rounded inputs, each allowed OWN_ERROR_RATIO
    times the error of the reference's own gradients in ``dtype`` plus one rounding
    (:func:`audit.kit.precision.own_error_mismatches`)."""
    if ref is None:
        return []
    got, truth, own = three_runs(fn, ref, args, seed, dtype)
    name = str(dtype).replace("torch.", "")
    return [f"{line}: against the reference's float64 autograd gradient (vjp with random cotangents), judged by the "
            f"error the reference itself makes in {name}"
            for line in own_error_mismatches("gradient of input", got[1], truth[1], own[1] if own else None, dtype,
                                             ratios, value_range(args), largest_input(args))]


def reference_gradients(fn, ref, args, seed: int):
    """The target's and the reference's gradients of <outputs, cotangents drawn from ``seed``>, each on its own
    leaves with the values of ``args``."""
    theirs = fresh(args)
    return (gradients(outputs_of(fn(*args)), args, seed),
            gradients(outputs_of(ref(*theirs)), theirs, seed))


def run(subject, case) -> None:
    """:func:`gradcheck` stage by stage, each failure excused on its own terms: finite differences where the target
    has no derivative; the reference's gradient where it is itself off finite differences, or where the target
    has no derivative along the differing columns. An entry with a proxy: :func:`against_proxy`, with a declared VJP:
    :func:`against_declared_vjp`, nothing excused."""
    for stage in (inputs_requiring_grad, sparse_gradients):
        judgement.settle(subject, case, replayable.stage(CHECK, stage, subject, case))
    if subject.entry.vjp:
        judgement.settle(subject, case, replayable.stage(CHECK, against_declared_vjp, subject, case))
        return
    if subject.entry.proxy:
        judgement.settle(subject, case, replayable.stage(CHECK, against_proxy, subject, case))
        return
    if subject.dtype in LOW_PRECISION_DTYPES:
        _half(subject, case)
        return
    args = subject.args(case)
    fn, inputs = wrap(subject, args), grad_inputs(args)
    eps = gradcheck_options(subject, inputs)["eps"]
    found = replayable.stage(CHECK, finite_differences, subject, case)
    if judgement.settle(subject, case, found, (Kink("gradcheck"),)):
        return
    parameters = parameter_backward if subject.entry.backward_only else parameter_differences
    judgement.settle(subject, case, replayable.stage(CHECK, parameters, subject, case))
    if replayable.values(CHECK, subject, case)["own_error"]:
        _by_own_error(subject, case)
        return
    observe = replayable.observer(subject, case, AGAINST,
                                  "the target's gradient judged by finite differences (gradcheck)")
    with reference.blamed_if_it_raises(subject, lambda: subject.args(case)):
        found = replayable.stage(CHECK, against_reference, subject, case, observe=observe)
    if found and _reference_excused(subject, case, fn, inputs, eps):
        return
    if found:  # last, the reference's own sensitivity at an ill-conditioned point
        with reference.blamed_if_it_raises(subject, lambda: subject.args(case)):
            found = replayable.stage(CHECK, partial(against_reference, sensitive=True), subject, case)
    judgement.settle(subject, case, found)


def _half(subject, case) -> None:
    """A float16 or bfloat16 cell: the gradient against the reference's by the precision's own error, or, without
    a reference, a skip that says why."""
    if replayable.compared_reference(subject, case) is None:
        raise NotApplicable(NO_FINITE_DIFFERENCES.format(dtype=subject.dtype))
    _by_own_error(subject, case)


def _by_own_error(subject, case) -> None:
    """:func:`against_own_error`; excused where the reference's own gradient is off finite differences in float64
    (a kink or a singular point: there is no true gradient to judge by)."""
    with reference.blamed_if_it_raises(subject, lambda: subject.args(case)):
        found = replayable.stage(CHECK, against_own_error, subject, case)
    judgement.settle(subject, case, found, (UnreliableReference(AGAINST),))


def _reference_excused(subject, case, fn, inputs, eps: float) -> bool:
    """Whether a difference from the reference's gradient says nothing: the reference's own gradient is off
    finite differences here, or the target has no derivative along the columns that differ."""
    if reference.unreliable(subject, case, AGAINST, subject.args(case)):
        return True
    args = subject.args(case)
    got, expected = reference_gradients(subject.evaluate, replayable.compared_reference(subject, case), args,
                                        subject.seed)
    expected = defined_only(got, expected)
    tol = subject.tolerance(tight=True)
    columns = [(i, c) for i, (g, e) in enumerate(zip(got, expected)) for c in _differing(g, e, tol)]
    return smoothness.excused(subject, AGAINST, case, fn, inputs, eps, columns)


def _differing(got: torch.Tensor, expected: torch.Tensor, tol) -> list[int]:
    """Flat indices where ``got`` is not close to ``expected``."""
    got, expected = dense(got), dense(expected)  # a sparse gradient: its values, zeros where unspecified
    close = torch.isclose(wide(got.detach()).cpu(), wide(expected.detach()).cpu(), rtol=tol.rtol,
                          atol=tol.atol, equal_nan=True)
    return torch.nonzero(~close.reshape(-1)).reshape(-1).tolist()


def _values(subject, case) -> dict:
    """:func:`gradcheck_values`; for a module, its parameters' options too: fast mode (see
    :func:`parameter_differences`), atol and rtol scaled by their size."""
    found = gradcheck_values(subject, case)
    module = replayable.target(subject).module
    params = [p for p in module.parameters() if p.requires_grad] if module is not None else []
    return {**found, "parameter_options": gradcheck_options(subject, params, fast=True)} if params else found


CHECK = declared("gradcheck", run=run, replay=gradcheck, script_values=_values,
                 replay_helpers=(inputs_requiring_grad, sparse_gradients, finite_differences, parameter_differences,
                                 parameter_backward, against_own_error, against_reference, reference_gradients,
                                 against_proxy, against_declared_vjp))

"""``forward_ad``: forward-mode AD (the jvp) equals finite differences."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.checking.judgement import Kink, Stage, with_proxy, without_proxy
from audit.kit.autograd import GradcheckError, grad_inputs, tangents, wrapped
from audit.kit.compare import FORWARD_AD_MISMATCH, Finding, mismatches
from audit.kit.explain import explain_forward_ad_failure, first_line
from audit.kit.precision import leaves_in
from audit.kit.proxy import ProxyError
from audit.toolkit.jacobian import backward_only, declared_rule, differences_in_half, gradcheck_values

def forward_ad(fn, ref, args, *, options, seed=0, tol=None, dtype=None, proxy=None, proxy_name="") -> list:
    """torch's gradcheck with only the forward-mode comparison turned on, with the audit's ``options`` for the
    cell, its failure located and sized (:func:`~audit.kit.explain.explain_forward_ad_failure`); a target without a
    forward-mode formula fails too. Where it holds, in float64 with a reference, the jvps against the reference's
    (:func:`jvps_against_reference`). With a declared ``proxy``, the jvps against the proxy's instead
    (:func:`jvps_against_proxy`)."""
    inputs = grad_inputs(args)
    if not inputs:
        return ["no input requires a gradient"]
    if proxy is not None:
        return jvps_against_proxy(fn, ref, args, proxy=proxy, seed=seed, tol=tol, dtype=dtype, proxy_name=proxy_name)
    try:
        torch.autograd.gradcheck(wrapped(fn, args), inputs, check_forward_ad=True, check_backward_ad=False,
                                 check_batched_grad=False, **options)
    except NotImplementedError as exc:
        return [f"no forward-mode formula: {first_line(exc)} (define a jvp staticmethod using ctx.save_for_forward, "
                "or claim supports.forward_ad: false)"]
    except GradcheckError as exc:
        return [Finding(explain_forward_ad_failure(wrapped(fn, args), inputs, exc, options), FORWARD_AD_MISMATCH)]
    if ref is not None and dtype in (torch.float64, torch.complex128):
        return jvps_against_reference(fn, ref, args, seed=seed, tol=tol, dtype=dtype)
    return []


def jvps_against_reference(fn, ref, args, *, seed, tol, dtype) -> list:
    """The target's jvps (tangents drawn from ``seed``) against the reference's forward-mode AD in float64, within
    the tight ``tol``: what finite differences cannot resolve (a jvp rounded through float32 is 1e-8 off). Nothing
    where the reference has no forward-mode formula."""
    try:
        want = tangents(ref, leaves_in(args, torch.float64), seed, dtype)
    except Exception:  # the reference cannot say (no forward-mode formula): finite differences have judged
        return []
    got = tangents(fn, args, seed, dtype)
    return [Finding(f"forward-mode AD: {line} against the reference's forward-mode AD (float64, random tangents)",
                    FORWARD_AD_MISMATCH) for line in mismatches("jvp of output", got, want, tol)]


def jvps_against_proxy(fn, ref, args, *, proxy, seed, tol, dtype, proxy_name="") -> list:
    """The target's jvps (tangents drawn from ``seed``) against the declared proxy's, by forward-mode AD of the proxy
    in float64 on the same values, within ``tol``; never against finite differences of the forward."""
    try:
        got = tangents(fn, args, seed, dtype)
    except NotImplementedError as exc:
        return [f"no forward-mode formula: {first_line(exc)} (define a jvp staticmethod using ctx.save_for_forward, "
                "or claim supports.forward_ad: false)"]
    try:
        want = tangents(proxy, leaves_in(args, torch.float64), seed, dtype)
    except Exception as exc:
        raise ProxyError(f"the proxy raised {type(exc).__name__} under forward-mode AD: {first_line(exc)}") from exc
    named = f" {proxy_name}" if proxy_name else ""
    return [f"{line} against the declared proxy{named} (its float64 forward-mode AD, random tangents): the jvp is "
            "not the intended one" for line in mismatches("jvp of output", got, want, tol)]


#: Not judged where .backward() alone gives gradients; with a proxy, against it, nothing excused; otherwise not
#: judged in half precision, and a mismatch with finite differences excused where the target has no derivative.
CHECK = declared("forward_ad", replay=forward_ad, script_values=gradcheck_values,
                 replay_helpers=(jvps_against_proxy, jvps_against_reference),
                 refusals=(backward_only("forward-mode AD"), declared_rule("jvp")),
                 stages=(Stage(when=with_proxy),
                         Stage(when=without_proxy, refusals=(differences_in_half("the jvp"),),
                               excuses=(Kink("forward_ad", families=(FORWARD_AD_MISMATCH,)),))))

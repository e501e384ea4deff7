"""Intended gradients: a backward checked against the declared proxy's autograd gradient or the declared VJP's
gradients, and second order."""

from __future__ import annotations

import contextlib
import functools
import torch
from audit.kit.autograd import differentiable, grad_inputs, grad_outputs, module_of, vjp, wrapped
from audit.kit.compare import Finding, _index, mismatches, number
from audit.kit.explain import first_line, user_site
from audit.kit.jacobians import DIFFERENCE_STEPS
from audit.kit.precision import (cotangents_in, largest_input, leaves_in, own_error_mismatches, rounded_vjps,
                                 value_range)
from audit.kit.tensors import cotangents_laid_out, dense, fresh, outputs_of


class ProxyError(Exception):
    """The entry's proxy is at fault, not the target: it raised, none of its outputs carries a gradient, or its
    gradient is undefined or off its own finite differences where drawn (the audit's cell is an error naming it)."""


def proxy_gradients(proxy, args, seed: int, dtype) -> list:
    """The proxy's gradients of <its differentiable outputs, :func:`cotangents_in` ``dtype``> for the arguments
    that require grad (zeros where unused), on new leaves with the values of ``args``: a :class:`ProxyError` where
    it raises, carries no gradient, or gives one that is NaN or inf."""
    try:
        found = rounded_vjps(proxy, fresh(args), seed, dtype)[1]
    except Exception as exc:
        raise ProxyError(f"the proxy raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}") from exc
    if not found:
        raise ProxyError("the proxy returned no output that carries a gradient (its autograd gradient is the "
                         "intended one: build it from differentiable torch ops)")
    for i, g in enumerate(found):
        bad = ~torch.isfinite(dense(g).detach())
        if bad.any():
            flat = int(bad.reshape(-1).int().argmax())
            raise ProxyError(f"the proxy's gradient of input {i} is {number(dense(g).reshape(-1)[flat].item())} at "
                             f"index {_index(bad.int(), g.shape)} ({value_range(args)}): undefined where drawn")
    return found


def proxy_differentiable(proxy, args) -> None:
    """A :class:`ProxyError` where the proxy's own autograd gradient disagrees with its finite differences at
    ``args`` (in float64): it has a kink there, or its backward is not its derivative, and says nothing."""
    leaves = leaves_in(args, torch.float64)
    inputs = grad_inputs(leaves)
    eps, tol = DIFFERENCE_STEPS[torch.float64]
    fast = sum(x.numel() for x in inputs) > 1024
    try:
        held = torch.autograd.gradcheck(wrapped(proxy, leaves), inputs, eps=eps, atol=tol.atol, rtol=tol.rtol,
                                        fast_mode=fast, raise_exception=False)
    except Exception as exc:
        raise ProxyError(f"the proxy raised {type(exc).__name__} under finite differences: {first_line(exc)}") from exc
    if not held:
        raise ProxyError(f"the proxy's own gradient disagrees with its finite differences ({value_range(args)}): it "
                         "is not a smooth primitive there (a straight-through expression such as step + (x - "
                         "x.detach()) is no proxy: write the function whose derivative is the intended gradient), "
                         "or it has a kink where drawn (keep the draws away with `kinks`, or narrow `domain`)")


def intended_mismatches(got, truth, own, args, tol, dtype, own_error: bool, ratios, against: str):
    """The target's gradients ``got`` against the intended ones ``truth`` (float64): within ``tol``, or, judged by the
    precision's own error (``own_error``), within OWN_ERROR_RATIO times the error ``against`` itself makes in
    ``dtype`` (``own()`` computes it there; where it raises :class:`ProxyError` the truth's rounding stands in); with
    how they were judged, for the message."""
    if not own_error:
        return mismatches("gradient of input", got, truth, tol), ""
    try:
        theirs = own()
    except ProxyError:  # no kernel in this dtype
        theirs = None
    name = str(dtype).replace("torch.", "")
    return (own_error_mismatches("gradient of input", got, truth, theirs, dtype, ratios, value_range(args),
                                 largest_input(args), against=against),
            f", judged by the error {against} itself makes in {name}")


def proxy_mismatches(fn, proxy, args, seed: int, tol, dtype, own_error: bool = False, ratios=None,
                     proxy_name: str = "") -> list:
    """The target's gradients (cotangents drawn from ``seed``, rounded to ``dtype``) against the proxy's in float64
    on the same values: within ``tol``, or, judged by the precision's own error (``own_error``), within
    OWN_ERROR_RATIO times the proxy's own error in ``dtype`` (:func:`own_error_mismatches`). Never against finite
    differences of the forward: the backward is meant not to be its derivative. The proxy is first held to its own
    finite differences there (:func:`proxy_differentiable`): a proxy that is not a smooth primitive says nothing."""
    proxy_differentiable(proxy, args)
    outputs, got = rounded_vjps(fn, args, seed, dtype)
    inputs = grad_inputs(args)
    truth = proxy_gradients(proxy, leaves_in(args, torch.float64), seed, dtype)
    found, how = intended_mismatches(got, truth, lambda: proxy_gradients(proxy, args, seed, dtype), args, tol, dtype,
                                     own_error, ratios, "the proxy")
    named = f" {proxy_name}" if proxy_name else ""
    narrowed = next((f"; output {i} is {str(o.dtype).replace('torch.', '')} for {str(x.dtype).replace('torch.', '')} "
                     "inputs, so the gradient reaching the backward is rounded to it (what the dtype check reports)"
                     for i, o in enumerate(outputs) for x in inputs[:1]
                     if o.dtype.is_floating_point and o.dtype != x.dtype), "")
    return [Finding(f"{line} against the declared proxy{named} (its float64 autograd gradient, vjp with random "
                    f"cotangents{how}): the backward is not the intended gradient{narrowed}",
                    f"{INTENDED}{getattr(line, 'kind', line)}", getattr(line, "family", "")) for line in found]


#: The cotangents a declared VJP is compared on, in turn: seeded random ones (both signs: a rule that reads the
#: cotangent's sign is seen on each side), all zeros, and the random ones laid out non-contiguously.
DECLARED_COTANGENTS = ("random", "zeros", "non-contiguous")


def declared_cotangents(outputs, seed: int, dtype, drawn: str) -> list:
    """Cotangents of ``outputs`` (:func:`cotangents_in` ``dtype``) as ``drawn`` names them
    (:data:`DECLARED_COTANGENTS`)."""
    found = cotangents_in(outputs, seed, dtype)
    if drawn == "zeros":
        return [torch.zeros_like(c) for c in found]
    if drawn == "non-contiguous":
        return [c.detach() for c in cotangents_laid_out(found, "transposed")]
    return found


def declared_vjp_gradients(rule, args, cotangents, name: str = "") -> list:
    """``rule(*args, *cotangents)`` (the entry's declared VJP, on detached values) for the arguments that require
    grad, None taken as zeros: a :class:`ProxyError` naming it where it raises, returns no tuple or list of one item
    per argument, or a gradient that is no tensor of its argument's shape, or NaN or inf."""
    named = f" {name}" if name else ""
    values = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]
    try:
        found = rule(*values, *cotangents)
    except Exception as exc:
        raise ProxyError(f"the declared VJP{named} raised {type(exc).__name__}: {first_line(exc)}"
                         f"{user_site(exc)}") from exc
    if not isinstance(found, (tuple, list)) or len(found) != len(args):
        got = f"{len(found)} gradients" if isinstance(found, (tuple, list)) else f"a {type(found).__name__}"
        raise ProxyError(f"the declared VJP{named} returned {got} for {len(args)} arguments: expected a tuple or list "
                         "with one gradient per argument (None where an argument has none), called as "
                         "vjp(*args, *grad_outputs)")
    grads = []
    for i, (g, a) in enumerate(zip(found, args)):
        if not (isinstance(a, torch.Tensor) and a.requires_grad):
            continue
        if g is None:
            grads.append(torch.zeros_like(a.detach()))
            continue
        if not isinstance(g, torch.Tensor) or g.shape != a.shape:
            shape = list(g.shape) if isinstance(g, torch.Tensor) else type(g).__name__
            raise ProxyError(f"the declared VJP{named} returned {shape} as the gradient of argument {i}, whose shape "
                             f"is {list(a.shape)}: expected a tensor of its argument's shape (or None)")
        bad = ~torch.isfinite(dense(g).detach())
        if bad.any():
            flat = int(bad.reshape(-1).int().argmax())
            raise ProxyError(f"the declared VJP{named}'s gradient of argument {i} is "
                             f"{number(dense(g).reshape(-1)[flat].item())} at index {_index(bad.int(), g.shape)} "
                             f"({value_range(args)}): undefined where drawn")
        grads.append(g.detach())
    return grads


def declared_vjp_mismatches(fn, rule, args, seed: int, tol, dtype, own_error: bool = False, ratios=None,
                            vjp_name: str = "") -> list:
    """The target's gradients against the declared VJP ``rule``'s (``vjp(*args, *grad_outputs)``, its intended
    gradients: a rule of its own, such as one that reads the cotangent's sign) on each of
    :data:`DECLARED_COTANGENTS` (drawn from ``seed``, rounded to ``dtype``), computed in float64 on the same values:
    within ``tol``, or, judged by the precision's own error (``own_error``), within OWN_ERROR_RATIO times the rule's
    own error in ``dtype`` (:func:`own_error_mismatches`). Never against finite differences of the forward: the
    backward is not its derivative. A rule that raises or returns the wrong count or shapes: a :class:`ProxyError`
    naming it (:func:`declared_vjp_gradients`)."""
    named = f" {vjp_name}" if vjp_name else ""
    inputs = grad_inputs(args)
    for drawn in DECLARED_COTANGENTS:
        outputs = differentiable(outputs_of(fn(*args)))
        if not (outputs and inputs):
            return []
        cotangents = declared_cotangents(outputs, seed, dtype, drawn)
        got = vjp(outputs, inputs, cotangents)
        wide = [c.to(torch.complex128 if c.is_complex() else torch.float64) for c in cotangents]
        truth = declared_vjp_gradients(rule, leaves_in(args, torch.float64), wide, vjp_name)
        own = functools.partial(declared_vjp_gradients, rule, args, cotangents, vjp_name)
        found, how = intended_mismatches(got, truth, own, args, tol, dtype, own_error, ratios, "the declared VJP")
        if found:
            return [Finding(f"{line} against the declared VJP{named} (its gradients in float64, {drawn} "
                            f"cotangents{how}): the backward is not the intended gradient",
                            f"{INTENDED}{getattr(line, 'kind', line)}", getattr(line, "family", ""))
                    for line in found]
    return []


#: How a finding against the declared proxy's gradient begins its kind: it is judged by what the entry declares (the
#: proxy, the output's dtype), never by the forward's derivative.
INTENDED = "not the intended gradient: "


@contextlib.contextmanager
def in_mode(fn, mode):
    """A module target ``fn`` in ``mode`` ("train" or "eval"; None: as it is) inside the block, restored after."""
    module = module_of(fn)
    was = module.training if module is not None else None
    if module is not None and mode is not None:
        module.train(mode == "train")
    try:
        yield
    finally:
        if module is not None:
            module.train(was)


def second_order(fn, args, seed: int) -> list:
    """The gradients of <the gradients of <outputs, v>, w> with respect to the inputs and to v (v, w drawn from
    ``seed``): what the backward's own derivative gives, zeros where it does not depend on one."""
    leaves = fresh(args)
    outputs = differentiable(outputs_of(fn(*leaves)))
    inputs = grad_inputs(leaves)
    if not (outputs and inputs):
        return []
    vs = [v.requires_grad_() for v in grad_outputs(outputs, seed)]
    first = vjp(outputs, inputs, vs, create_graph=True)
    live = [(g, w) for g, w in zip(first, grad_outputs(first, seed + 1)) if g.requires_grad]
    if not live:
        return [torch.zeros_like(x) for x in inputs + vs]
    return [t.detach() for t in vjp([g for g, _ in live], inputs + vs, [w for _, w in live])]


def bypass_hint(label: str, proxy_name: str, transform: str, vjp_name: str = "") -> str:
    """Said of a gradient that differs from the eager one under ``transform`` when the entry declares a proxy (or a
    VJP, ``vjp_name``): the transform may have bypassed the custom backward (a compiled step's own derivative is
    zero)."""
    if not (proxy_name or vjp_name) or "gradient" not in label:
        return ""
    return (f"; the entry's backward is intended ({intended_by(proxy_name, vjp_name)}): under {transform} the custom "
            "backward did not run, or ran otherwise (a traced forward's own derivative is not the intended gradient)")


def intended_by(proxy_name: str, vjp_name: str) -> str:
    """What declares an entry's intended gradient, as messages name it ("proxy m:f", "vjp m:f"); "" for neither."""
    return f"proxy {proxy_name}" if proxy_name else f"vjp {vjp_name}" if vjp_name else ""

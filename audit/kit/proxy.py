"""Intended gradients: a backward checked against the declared proxy's autograd gradient, and second order."""

from __future__ import annotations

import contextlib
import torch
from audit.kit.autograd import differentiable, grad_inputs, grad_outputs, module_of, vjp, wrapped
from audit.kit.compare import Finding, _index, mismatches, number
from audit.kit.explain import first_line, user_site
from audit.kit.jacobians import DIFFERENCE_STEPS
from audit.kit.precision import largest_input, leaves_in, own_error_mismatches, rounded_vjps, value_range
from audit.kit.tensors import dense, fresh, outputs_of


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
    name = str(dtype).replace("torch.", "")
    how = ""
    if own_error:
        try:
            own = proxy_gradients(proxy, args, seed, dtype)
        except ProxyError:  # the proxy has no kernel in this dtype: the truth's rounding stands in
            own = None
        found = own_error_mismatches("gradient of input", got, truth, own, dtype, ratios, value_range(args),
                                     largest_input(args), against="the proxy")
        how = f", judged by the error the proxy itself makes in {name}"
    else:
        found = mismatches("gradient of input", got, truth, tol)
    named = f" {proxy_name}" if proxy_name else ""
    narrowed = next((f"; output {i} is {str(o.dtype).replace('torch.', '')} for {str(x.dtype).replace('torch.', '')} "
                     "inputs, so the gradient reaching the backward is rounded to it (what the dtype check reports)"
                     for i, o in enumerate(outputs) for x in inputs[:1]
                     if o.dtype.is_floating_point and o.dtype != x.dtype), "")
    return [Finding(f"{line} against the declared proxy{named} (its float64 autograd gradient, vjp with random "
                    f"cotangents{how}): the backward is not the intended gradient{narrowed}",
                    f"{INTENDED}{getattr(line, 'kind', line)}", getattr(line, "family", "")) for line in found]


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


def bypass_hint(label: str, proxy_name: str, transform: str) -> str:
    """Said of a gradient that differs from the eager one under ``transform`` when the entry declares a proxy: the
    transform may have bypassed the custom backward (a compiled step's own derivative is zero)."""
    if not proxy_name or "gradient" not in label:
        return ""
    return (f"; the entry's backward is intended (proxy {proxy_name}): under {transform} the custom backward did "
            "not run, or ran otherwise (a traced forward's own derivative is not the intended gradient)")

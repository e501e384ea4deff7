"""``gradgradcheck``: second derivatives (the backward's own gradient) equal finite differences."""

from __future__ import annotations

import torch

from audit.checking import smoothness
from audit.catalog.checks import declared
from audit.checking.judgement import Kink, Stage, at_target, with_proxy, without_proxy
from audit.kit.autograd import (GradcheckError, NO_GRADIENT_OUTPUT, differentiable, grad_inputs, grad_outputs, vjp,
                                wrapped)
from audit.kit.compare import mismatch
from audit.kit.explain import explain_gradgradcheck_failure, first_line
from audit.kit.proxy import ProxyError, second_order
from audit.kit.tensors import outputs_of
from audit.toolkit.jacobian import backward_only, declared_rule, differences_in_half, gradcheck_values


def gradgradcheck(fn, ref, args, *, seed, options, tol=None, proxy=None, proxy_name="") -> list:
    """A backward that autograd can differentiate (:func:`differentiable_backward`), then torch's gradgradcheck
    with the audit's ``options`` for the cell; with a declared ``proxy``, the second derivative against the
    proxy's instead (:func:`second_against_proxy`)."""
    if proxy is not None:
        return (differentiable_backward(fn, ref, args, seed=seed)
                or second_against_proxy(fn, ref, args, proxy=proxy, seed=seed, tol=tol, proxy_name=proxy_name))
    return (differentiable_backward(fn, ref, args, seed=seed)
            or second_differences(fn, ref, args, options=options, seed=seed))


def second_against_proxy(fn, ref, args, *, proxy, seed, tol, proxy_name="") -> list:
    """The derivative of the target's backward (<grad, w> by the inputs and by the cotangent, v and w drawn from
    ``seed``) against the declared proxy's, on the same values within ``tol``: the intended second derivative."""
    got = second_order(fn, args, seed)
    try:
        want = second_order(proxy, args, seed)
    except Exception as exc:
        raise ProxyError(f"the proxy raised {type(exc).__name__} differentiating its gradient: "
                         f"{first_line(exc)}") from exc
    inputs = len(grad_inputs(args))
    named = f" {proxy_name}" if proxy_name else ""
    for i, (g, e) in enumerate(zip(got, want)):
        problem = mismatch(g, e, tol)
        if problem:
            by = f"input {i}" if i < inputs else f"grad_output {i - inputs}"
            return [f"second derivative (the backward's gradient with respect to {by}): {problem} against the "
                    f"declared proxy{named} (its second derivative, random cotangents)"]
    if len(got) != len(want):
        return [f"second derivative: {len(got)} tensors, the declared proxy{named}'s {len(want)}"]
    return []


def differentiable_backward(fn, ref, args, *, seed) -> list:
    """Names a backward autograd cannot differentiate. The cotangents (drawn from ``seed``) require grad, as
    torch's gradgradcheck's do, so a linear backward (grad, grad.sum(0), grad.split(...)) yields results that
    require grad through them. A result that does not is a cut, unless it is all zeros: a constant zero
    gradient (round, floor, sign: torch's own return zeros_like) has a zero derivative, which torch's
    gradgradcheck then confirms numerically. A nonzero gradient is linear in grad_output, so one that
    does not require grad hides how it was computed."""
    inputs = grad_inputs(args)
    if not inputs:
        return ["no input requires a gradient"]
    outputs = differentiable(outputs_of(fn(*args)))
    if not outputs:
        return [NO_GRADIENT_OUTPUT]
    cotangents = [c.requires_grad_() for c in grad_outputs(outputs, seed)]
    grads = vjp(outputs, inputs, cotangents, create_graph=True, fill=False)
    for i, g in enumerate(grads):
        if g is not None and _reaches(g.grad_fn, "torch::autograd::Error"):  # @once_differentiable's node
            return [f"gradient of input {i}: the backward is marked @once_differentiable: differentiating its "
                    "result raises; drop the decorator and build the backward from differentiable torch ops, or "
                    "claim supports.double_backward: false"]
        if g is not None and not g.requires_grad and g.count_nonzero():
            return [f"gradient of input {i}: the backward's result does not require grad although grad_output "
                    "does: autograd cannot see how it was computed (x.detach(), .data, numpy); build the backward "
                    "from differentiable torch ops, or claim supports.double_backward: false"]
    return []


def _reaches(node, name: str) -> bool:
    """Whether the autograd graph from ``node`` holds a node called ``name`` (@once_differentiable puts one
    called "torch::autograd::Error" over a backward's results when grad mode is on: it raises only once the
    engine reaches it)."""
    seen, stack = set(), [node]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        if node.name() == name:
            return True
        seen.add(node)
        stack.extend(next_node for next_node, _ in node.next_functions)
    return False


def second_differences(fn, ref, args, *, options, seed=0) -> list:
    """torch's gradgradcheck of the target with ``options``; a failure located and sized
    (:func:`audit.kit.explain.explain_gradgradcheck_failure`: where, both values, the allowance, and whether the
    difference stays when the step shrinks)."""
    of_inputs, inputs = wrapped(fn, args), grad_inputs(args)
    try:
        torch.autograd.gradgradcheck(of_inputs, inputs, **options)
    except GradcheckError as exc:
        return [explain_gradgradcheck_failure(of_inputs, inputs, exc, options, seed)]
    return []


def backward_at(subject, case):
    """The backward (the gradients of <target, cotangents drawn from the cell's seed>) as a differentiable function
    of the inputs, and those inputs: where it has no derivative, the target has no second one."""
    fn, inputs = at_target(subject, case)
    return smoothness.backward_of(fn, subject.seed), inputs


#: Not judged where .backward() alone gives gradients; the backward differentiable first; then with a proxy, its
#: second derivative, nothing excused; otherwise, not in half precision, finite differences of the backward,
#: excused where the backward has no derivative.
CHECK = declared("gradgradcheck", replay=gradgradcheck, script_values=gradcheck_values,
                 replay_helpers=(_reaches, differentiable_backward, second_differences, second_against_proxy),
                 refusals=(backward_only("a gradient of the gradient"), declared_rule("second derivative")),
                 stages=(Stage(differentiable_backward),
                         Stage(second_against_proxy, when=with_proxy),
                         Stage(second_differences, when=without_proxy,
                               refusals=(differences_in_half("the second derivative"),),
                               excuses=(Kink("gradgradcheck", at=backward_at),))))

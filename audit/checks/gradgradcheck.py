"""``gradgradcheck``: second derivatives (the backward's own gradient) equal finite differences."""

from __future__ import annotations

import torch
from torch.autograd.gradcheck import GradcheckError

from audit.checks import smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.toolkit.jacobian import gradcheck_options, gradcheck_values, torch_sentence, wrap
from audit.toolkit.tensors import differentiable, grad_inputs, grad_outputs, outputs_of

CUT = ("the backward's result does not require grad although grad_output does: autograd cannot see how it "
       "was computed (x.detach(), .data, numpy); build the backward from differentiable torch ops, or claim "
       "supports.double_backward: false")
ONCE = ("the backward is marked @once_differentiable: differentiating its result raises; drop the decorator "
        "and build the backward from differentiable torch ops, or claim supports.double_backward: false")
#: The name of the node @once_differentiable puts over a backward's results when grad mode is on: it
#: raises only once the engine reaches it.
_DELAYED_ERROR = "torch::autograd::Error"


def run(subject, case) -> None:
    """torch's gradgradcheck on the target; explains a backward that autograd cannot see through."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    if not inputs:
        raise Violation("no input requires a gradient")
    _differentiable_backward(subject, args, inputs)
    options = gradcheck_options(subject, inputs)
    fn = wrap(subject, args)
    try:
        torch.autograd.gradgradcheck(fn, inputs, **options)
    except GradcheckError as exc:
        if smoothness.excused(subject, "gradgradcheck", case, smoothness.backward_of(fn, subject.seed), inputs,
                              options["eps"]):
            return
        raise Violation(f"torch.autograd.gradgradcheck: {torch_sentence(exc)}") from None


def _differentiable_backward(subject, args, inputs) -> None:
    """Names a backward autograd cannot differentiate. The cotangents require grad, as torch's
    gradgradcheck's do, so a linear backward (grad, grad.sum(0), grad.split(...)) yields results that
    require grad through them. A result that does not is a cut, unless it is all zeros: a constant zero
    gradient (round, floor, sign: torch's own return zeros_like) has a zero derivative, which torch's
    gradgradcheck then confirms numerically. A nonzero gradient is linear in grad_output, so one that
    does not require grad hides how it was computed."""
    outputs = differentiable(outputs_of(subject.call(args)))
    if not outputs:
        raise Violation("returned no differentiable output: nothing carries a gradient back")
    cotangents = [c.requires_grad_() for c in grad_outputs(outputs, subject.seed)]
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True, create_graph=True)
    for i, g in enumerate(grads):
        if g is not None and _reaches(g.grad_fn, _DELAYED_ERROR):
            raise Violation(f"gradient of input {i}: {ONCE}")
        if g is not None and not g.requires_grad and g.count_nonzero():
            raise Violation(f"gradient of input {i}: {CUT}")


def _reaches(node, name: str) -> bool:
    """Whether the autograd graph from ``node`` holds a node called ``name``."""
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


CHECK = declared(
    "gradgradcheck",
    run=run,
    script="""\
from torch.autograd.gradcheck import GradcheckError
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
def f(*xs):
    it = iter(xs)
    return fn(*[next(it) if torch.is_tensor(a) and a.requires_grad else a for a in args])
failed = False
out = fn(*args)
outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(o) and o.requires_grad]
generator = torch.Generator().manual_seed(seed)
cots = [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o).requires_grad_() for o in outs]
try:  # the backward must be differentiable: with cotangents that require grad, so must its nonzero results
    found = torch.autograd.grad(outs, diff, cots, allow_unused=True, create_graph=True)
    def reaches(node, name):  # whether the backward's graph holds a node called name
        seen, stack = set(), [node]
        while stack:
            node = stack.pop()
            if node is not None and node not in seen:
                if node.name() == name:
                    return True
                seen.add(node)
                stack.extend(n for n, _ in node.next_functions)
        return False
    for i, g in enumerate(found):
        if g is not None and reaches(g.grad_fn, "torch::autograd::Error"):
            print(f"gradient of input {i}: the backward is @once_differentiable: differentiating it raises")
            failed = True
        if g is not None and not g.requires_grad and g.count_nonzero():
            print(f"gradient of input {i} does not require grad although grad_output does: the backward is cut")
            failed = True
    if not failed:
        torch.autograd.gradgradcheck(f, diff, **options)
except (GradcheckError, RuntimeError) as exc:  # RuntimeError: e.g. @once_differentiable
    print("gradgradcheck:", exc)
    failed = True
print("FAILS" if failed else "holds")
sys.exit(1 if failed else 0)
""",
    script_values=gradcheck_values,
)

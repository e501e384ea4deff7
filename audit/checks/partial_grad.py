"""``partial_grad``: with only one input requiring grad, backward runs and gives that input the gradient
it gets when every input requires grad (autograd itself keeps the others' gradients None; a backward may
return a gradient for them, which autograd drops).

Real code calls a Function with any subset of its inputs requiring grad (a frozen weight, a constant
mask), and autograd passes that subset to backward as ``ctx.needs_input_grad``. A backward that computes
one gradient under ``if ctx.needs_input_grad[0]`` and uses it outside that branch raises only when input
0 does not require grad; one that skips a term the other gradients need is wrong only then.
"""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.errors import first_line
from audit.frames import user_site
from audit.toolkit.tensors import floating, mismatch, outputs_of, widest


def run(subject, case) -> None:
    """Backward with every input requiring grad, then with each one alone: the same gradient."""
    positions = [i for i, a in enumerate(subject.args(case)) if isinstance(a, torch.Tensor) and a.requires_grad]
    full = _backward(subject, case, positions)
    for i in positions:
        try:
            alone = _backward(subject, case, [i])
        except Exception as exc:
            raise Violation(f"with only input {i} requiring grad, {type(exc).__name__}: {first_line(exc)}"
                            f"{user_site(exc)}: a gradient computed only under ctx.needs_input_grad[j] and "
                            "used outside that branch?") from None
        problem = mismatch(_dense(alone[i], full[i]), _dense(full[i], full[i]), subject.tolerance())
        if problem:
            raise Violation(f"gradient of input {i} with only input {i} requiring grad vs with all "
                            f"{len(positions)} requiring it: {problem}")


def _backward(subject, case, wanted: list[int]) -> dict[int, torch.Tensor | None]:
    """``.grad`` of every tensor input after backward, with only ``wanted`` requiring grad."""
    args = [a.detach().requires_grad_(i in wanted) if isinstance(a, torch.Tensor) and floating(a) else a
            for i, a in enumerate(subject.args(case))]
    kept = [o for o in outputs_of(subject.call(args)) if floating(o)]
    generator = torch.Generator().manual_seed(subject.seed)  # one cotangent per output, whichever are live
    cotangents = [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o) for o in kept]
    live = [(o, c) for o, c in zip(kept, cotangents) if o.requires_grad]
    if live:
        torch.autograd.backward([o for o, _ in live], [c for _, c in live])
    return {i: a.grad for i, a in enumerate(args) if isinstance(a, torch.Tensor)}


def _dense(grad: torch.Tensor | None, like: torch.Tensor | None) -> torch.Tensor:
    if grad is not None:
        return grad
    return torch.zeros_like(like) if like is not None else torch.zeros(0)


CHECK = declared(
    "partial_grad",
    run=run,
    script="""\
positions = [i for i, a in enumerate(args) if torch.is_tensor(a) and a.requires_grad]

def grads(wanted):
    xs = [a.detach().requires_grad_(i in wanted) if torch.is_tensor(a) and floating(a) else a
          for i, a in enumerate(args)]
    out = fn(*xs)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else [out]) if torch.is_tensor(o) and floating(o)]
    generator = torch.Generator().manual_seed(seed)
    cots = [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o) for o in outs]
    live = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
    if live:
        torch.autograd.backward([o for o, _ in live], [c for _, c in live])
    return {i: x.grad for i, x in enumerate(xs) if torch.is_tensor(x)}

full = grads(positions)
failed = False
for i in positions:
    alone = grads([i])  # raises here when backward cannot run with only input i requiring grad
    got = alone[i] if alone[i] is not None else torch.zeros_like(full[i])
    if not close(got, full[i]):
        print("input", i, "alone:", got, "with all:", full[i])
        failed = True
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,  # the script compares at the check's tolerance
)

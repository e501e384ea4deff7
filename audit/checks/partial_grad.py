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

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.compare import mismatch
from audit.kit.explain import first_line, user_site
from audit.kit.tensors import floating, outputs_of, widest


def partial_grad(fn, ref, args, *, seed, tol) -> list:
    """Backward (cotangents drawn from ``seed``) with every input requiring grad, then with each one alone: the
    same gradient for it, within ``tol``; a backward that raises with one alone fails too."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    full = backward_with(fn, args, positions, seed)
    for i in positions:
        try:
            alone = backward_with(fn, args, [i], seed)
        except Exception as exc:
            return [f"with only input {i} requiring grad, {type(exc).__name__}: {first_line(exc)}{user_site(exc)}: "
                    "a gradient computed only under ctx.needs_input_grad[j] and used outside that branch?"]
        got, expected = (g if g is not None else torch.zeros_like(full[i]) if full[i] is not None else torch.zeros(0)
                         for g in (alone[i], full[i]))  # None: no gradient arrived, zeros
        problem = mismatch(got, expected, tol)
        if problem:
            return [f"gradient of input {i} with only input {i} requiring grad vs with all {len(positions)} "
                    f"requiring it: {problem}"]
    return []


def backward_with(fn, args, wanted: list, seed: int) -> dict:
    """``.grad`` of every tensor argument after backward (one cotangent per floating output, drawn from ``seed``,
    whichever are live), on new leaves with the values of ``args``, only those at ``wanted`` requiring grad."""
    leaves = [a.detach().requires_grad_(i in wanted) if isinstance(a, torch.Tensor) and floating(a) else a
              for i, a in enumerate(args)]
    kept = [o for o in outputs_of(fn(*leaves)) if floating(o)]
    generator = torch.Generator().manual_seed(seed)
    cotangents = [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o) for o in kept]
    live = [(o, c) for o, c in zip(kept, cotangents) if o.requires_grad]
    if live:
        torch.autograd.backward([o for o, _ in live], [c for _, c in live])
    return {i: a.grad for i, a in enumerate(leaves) if isinstance(a, torch.Tensor)}


CHECK = declared("partial_grad", replay=partial_grad, replay_helpers=(backward_with,),
                 script_values=tolerance_values)

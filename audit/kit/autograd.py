"""Autograd plumbing: which inputs take a gradient, seeded cotangents, vector-Jacobian products, a target as a
function of its differentiable inputs, a module target, and a target whose backward only .backward() runs."""

from __future__ import annotations

import sys
import threading
import torch
from audit.kit.tensors import cotangents_laid_out, dense, floating, outputs_of, widest


def differentiable(tensors) -> list:
    """The floating (or complex) tensors that take part in autograd."""
    return [t for t in tensors if floating(t) and t.requires_grad]


def grad_inputs(args) -> list:
    """The arguments a gradient is taken with respect to."""
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def grad_outputs(outputs, seed: int) -> list:
    """Deterministic random cotangents, one per output, in each output's dtype and device: drawn from ``seed`` in
    float64, in complex128 for a complex output (a real cotangent would leave its imaginary part unexamined)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o.dtype).to(o.device) for o in outputs]


def filled(grads, inputs) -> list:
    """Gradients with each ``None`` (input unused) replaced by zeros of the input's shape."""
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def vjp(outputs, inputs, cotangents, *, create_graph: bool = False, retain_graph=None, fill: bool = True) -> list:
    """The one vector-Jacobian product of the kit and the checks: the gradients of <``outputs``, ``cotangents``>
    with respect to ``inputs``. ``cotangents``: a seed (an int: drawn by :func:`grad_outputs`, one per output) or the
    tensors themselves. An input the outputs do not reach gets zeros of its shape (``fill``), or None."""
    if isinstance(cotangents, int):
        cotangents = grad_outputs(outputs, cotangents)
    found = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True, create_graph=create_graph,
                                retain_graph=retain_graph)
    return filled(found, inputs) if fill else list(found)


def gradients(outputs, args, seed: int) -> list:
    """Gradients of <differentiable outputs, random cotangents> for each argument that requires grad (zeros where
    unused); empty when nothing is differentiable."""
    inputs, chosen = grad_inputs(args), differentiable(outputs)
    if not (inputs and chosen):
        return []
    return vjp(chosen, inputs, seed)


def call_vjp(fn, args, seed: int, *, keep: str = "differentiable", layout: str | None = None):
    """``fn(*args)`` and the vjp of what it returns: (outputs, gradients), the one way a property calls a target for
    its gradients. The gradients are those of <its differentiable outputs, cotangents drawn from ``seed``> for the
    arguments that require grad (:func:`vjp`: zeros where unused; [] when nothing is differentiable), the
    cotangents laid out by ``layout`` (:func:`~audit.kit.tensors.cotangents_laid_out`). ``keep`` names the outputs
    returned: "differentiable" (those with a graph, as they are), "floating" (every floating one, detached) or "all"
    (every tensor, detached)."""
    outputs = outputs_of(fn(*args))
    live, inputs = differentiable(outputs), grad_inputs(args)
    grads = []
    if live and inputs:
        cotangents = grad_outputs(live, seed)
        grads = vjp(live, inputs, cotangents_laid_out(cotangents, layout) if layout is not None else cotangents)
    if keep == "differentiable":
        return live, grads
    kept = [o for o in outputs if keep == "all" or floating(o)]
    return [o.detach() for o in kept], grads


#: torch's gradcheck failure (its module's name is shadowed by the function ``torch.autograd.gradcheck``).
GradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError


#: Why a gradient property has nothing to compare.
NO_GRADIENT_OUTPUT = "returned no differentiable output: nothing carries a gradient back"


def module_of(fn):
    """The nn.Module that the target ``fn`` calls (``fn.module``: :func:`guarded` keeps it), or None."""
    module = getattr(fn, "module", None)
    return module if isinstance(module, torch.nn.Module) else None


def wrapped(fn, args):
    """``fn`` as a function of the arguments that require grad only (the others fixed to ``args``'), returning its
    floating outputs, dense (a sparse output made dense: masked, its gradient stays on its pattern), as torch's
    gradcheck asks: one tensor, or a tuple of them."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]

    def of_inputs(*inputs):
        full = list(args)
        for i, x in zip(positions, inputs):
            full[i] = x
        outputs = [dense(o) for o in outputs_of(fn(*full)) if floating(o)]
        return tuple(outputs) if len(outputs) != 1 else outputs[0]

    return of_inputs


def tangents(fn, args, seed: int, dtype) -> list:
    """Forward-mode AD of ``fn`` at ``args``: the tangent of each floating output (zeros where none) for tangents
    of the inputs that require grad drawn from ``seed`` (rounded to ``dtype``)."""
    import torch.autograd.forward_ad as fwAD

    generator = torch.Generator().manual_seed(seed + 1)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(a.detach(), torch.randn(a.shape, generator=generator, dtype=torch.float64)
                                .to(dtype).to(a.dtype).to(a.device))
                 if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
        outs = [o for o in outputs_of(fn(*duals)) if floating(o)]
        found = [fwAD.unpack_dual(o).tangent for o in outs]
        return [torch.zeros_like(o.detach()) if t is None else t.detach().clone() for o, t in zip(outs, found)]


class _ThroughBackward(torch.autograd.Function):
    """The target on new leaves inside its forward; its backward runs the target's with torch.autograd.backward (no
    ``inputs``: what reentrant checkpointing and reversible layers accept), in a thread of its own, and returns the
    leaves' ``.grad``. The first backward goes through the graph forward built, as training's does (what the target
    saved, and anything done to it since, counts); each further one (gradcheck takes one per row) runs the target
    again on new leaves, from the random state forward started with, for the libraries that allow one backward per
    forward (memcnn's ``num_bwd_passes=1``)."""

    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call, ctx.needs = call, ctx.needs_input_grad[1:]
        ctx.rng = torch.get_rng_state()
        ctx.save_for_backward(*tensors)
        with torch.enable_grad():
            ctx.leaves = [t.detach().requires_grad_(need) for t, need in zip(tensors, ctx.needs)]
            result = call(ctx.leaves)
        ctx.outputs = [o for o in outputs_of(result) if isinstance(o, torch.Tensor)]
        ctx.mark_non_differentiable(*[o for o in ctx.outputs if not floating(o)])
        kept = tuple(o.detach() for o in ctx.outputs)
        return kept[0] if isinstance(result, torch.Tensor) else kept

    @staticmethod
    def backward(ctx, *cotangents):
        first = ctx.outputs is not None
        leaves = ctx.leaves if first else [t.detach().requires_grad_(need)
                                           for t, need in zip(ctx.saved_tensors, ctx.needs)]
        outputs, ctx.outputs = ctx.outputs, None
        raised = []

        def run():
            try:
                found = outputs
                if found is None:
                    with torch.random.fork_rng(devices=[]):
                        torch.set_rng_state(ctx.rng)
                        found = [o for o in outputs_of(ctx.call(leaves)) if isinstance(o, torch.Tensor)]
                live = [(o, c) for o, c in zip(found, cotangents) if o.requires_grad and c is not None]
                if live:
                    torch.autograd.backward([o for o, _ in live], [c for _, c in live])
            except Exception as exc:
                raised.append(exc)

        # A backward of its own, in a thread of its own: nested inside torch.autograd.grad's (on this thread), it
        # would count as one that .grad() started, and the target would refuse it again.
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        if raised:
            raise raised[0]
        return (None, *[leaf.grad if leaf.requires_grad else None for leaf in leaves])


def backward_only(f):
    """``f`` with every gradient of it taken through torch.autograd.backward, reading ``.grad`` of new leaves
    (:class:`_ThroughBackward`), so that torch.autograd.grad, gradcheck and the audit's properties can differentiate
    a target that refuses ``.grad()``; a call with nothing to differentiate calls ``f`` as it is. A module's
    parameters, reached by ``f`` itself, get their ``.grad`` as in training."""
    def call(*args):
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        if not (torch.is_grad_enabled() and any(args[i].requires_grad for i in positions)):
            return f(*args)

        def on(leaves):
            full = list(args)
            for i, leaf in zip(positions, leaves):
                full[i] = leaf
            return f(*full)

        return _ThroughBackward.apply(on, *[args[i] for i in positions])

    call.module = f if isinstance(f, torch.nn.Module) else getattr(f, "module", None)
    for name in ("fresh", "factory", "SEED"):  # a module target stays reachable as the audit reaches it
        if hasattr(f, name):
            setattr(call, name, getattr(f, name))
    return call

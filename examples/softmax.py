"""Softmax with a temperature, as a Function that saves its output; its values lie on the simplex."""

from __future__ import annotations

import torch


class Softmax(torch.autograd.Function):
    """``softmax(x / t)`` over the last dim; the backward uses the saved output only."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor, temperature: float) -> torch.Tensor:
        z = x / temperature
        z = z - z.amax(dim=-1, keepdim=True)
        e = z.exp()
        return e / e.sum(dim=-1, keepdim=True)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.temperature = inputs[1]  # a Python float: safe to keep on ctx
        ctx.save_for_backward(output)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (p,) = ctx.saved_tensors
        dot = (grad * p).sum(dim=-1, keepdim=True)
        return p * (grad - dot) / ctx.temperature, None


def softmax(x: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """The public wrapper, audited as a callable."""
    return Softmax.apply(x, temperature)


def reference(x: torch.Tensor, temperature: float) -> torch.Tensor:
    """torch's softmax."""
    return torch.softmax(x / temperature, dim=-1)

"""A two-output Function: (sin x, cos x) from one pass, with a backward that takes either gradient alone."""

from __future__ import annotations

import torch


class SinCos(torch.autograd.Function):
    """Both outputs from one call; the backward treats a missing output gradient as zero."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor):
        return torch.sin(x), torch.cos(x)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad_sin, grad_cos):
        (x,) = ctx.saved_tensors
        grad = torch.zeros_like(x)
        if grad_sin is not None:
            grad = grad + grad_sin * torch.cos(x)
        if grad_cos is not None:
            grad = grad - grad_cos * torch.sin(x)
        return grad


def reference(x: torch.Tensor):
    """The two torch calls."""
    return torch.sin(x), torch.cos(x)

"""A ``torch.library`` custom op (softplus with a threshold), with its autograd formula and fake kernel."""

from __future__ import annotations

import torch


@torch.library.custom_op("examples::softplus", mutates_args=())
def softplus(x: torch.Tensor, beta: float) -> torch.Tensor:
    """``log(1 + exp(beta x)) / beta``, computed stably."""
    bx = x * beta
    return (torch.clamp(bx, min=0) + torch.log1p(torch.exp(-bx.abs()))) / beta


@softplus.register_fake
def _(x: torch.Tensor, beta: float) -> torch.Tensor:
    return torch.empty_like(x)


def _setup_context(ctx, inputs, output) -> None:
    x, beta = inputs
    ctx.beta = beta
    ctx.save_for_backward(x)


def _backward(ctx, grad: torch.Tensor):
    (x,) = ctx.saved_tensors
    return grad * torch.sigmoid(x * ctx.beta), None


softplus.register_autograd(_backward, setup_context=_setup_context)


def reference(x: torch.Tensor, beta: float) -> torch.Tensor:
    """torch's softplus (no threshold, so it is exact everywhere)."""
    return torch.nn.functional.softplus(x, beta=beta, threshold=1e9)

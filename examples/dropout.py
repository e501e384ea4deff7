"""Inverted dropout as a custom Function: the mask drawn once in forward, saved, and reused by backward."""

from __future__ import annotations

import torch


class Dropout(torch.autograd.Function):
    """Zero each element with probability ``p`` and scale the rest by ``1 / (1 - p)`` (training mode), so
    that the output's mean is the input; backward multiplies by the same scaled mask."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, p: float) -> torch.Tensor:
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout probability must be in [0, 1), got {p}")
        mask = torch.empty_like(x).bernoulli_(1.0 - p).div_(1.0 - p)
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (mask,) = ctx.saved_tensors
        return grad * mask, None

"""A small classifier on SoftplusMLP whose loss is cross-entropy written with the LogSumExp Function."""

from __future__ import annotations

import torch

from examples.layers import SoftplusMLP
from examples.logsumexp import LogSumExp


def make_batch(size: int, seed: int):
    """``size`` points in R^4 and a class in {0, 1, 2} that depends on them (learnable)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(size, 4, generator=generator)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return (x,), y


def loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Cross-entropy: logsumexp of the logits minus the target's logit, averaged over the batch."""
    return (LogSumExp.apply(logits) - logits.gather(1, target[:, None]).squeeze(1)).mean()


def build():
    """The (model, make_batch, loss) triple a registry entry of kind model names."""
    return SoftplusMLP(), make_batch, loss

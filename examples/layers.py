"""A module built from this repository's custom code: Linear, the softplus op, Linear."""

from __future__ import annotations

import torch

import examples.library_op  # noqa: F401  (registers examples::softplus)


class SoftplusMLP(torch.nn.Module):
    """4 → 8 → 3, with ``examples::softplus`` (a torch.library op) as the activation."""

    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(4, 8)
        self.out = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.ops.examples.softplus(self.hidden(x), 1.0))


def build() -> SoftplusMLP:
    """The module factory a registry entry of kind module names."""
    return SoftplusMLP()

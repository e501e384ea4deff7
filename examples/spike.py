"""A spiking neuron's threshold: a Heaviside forward whose backward is a surrogate (the arctan slope of spikingjelly's
ATan), deliberately not the step's derivative (zero). The registry declares the intended gradient as ``proxy``: a
smooth primitive whose autograd gradient is the surrogate."""

from __future__ import annotations

import math

import torch

ALPHA = 2.0  #: the surrogate's sharpness


class ATanSpike(torch.autograd.Function):
    """1 where x >= 0, else 0; backward: alpha/2 / (1 + (pi/2 alpha x)^2) times the incoming gradient."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x: torch.Tensor) -> torch.Tensor:
        return (x >= 0).to(x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * (ALPHA / 2) / (1 + (math.pi / 2 * ALPHA * x) ** 2)


def primitive(x: torch.Tensor) -> torch.Tensor:
    """The proxy: atan(pi/2 alpha x) / pi + 1/2, whose derivative is the surrogate."""
    return torch.atan(math.pi / 2 * ALPHA * x) / math.pi + 0.5


def reference(x: torch.Tensor) -> torch.Tensor:
    """The forward in plain torch."""
    return torch.heaviside(x, torch.ones_like(x))

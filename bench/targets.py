"""Correct custom Functions for the benchmark registry: x ** k for several k, and a two-input scale."""

from __future__ import annotations

import torch

from tests.fixtures.transforms import RowScaleBatched


def _power(k: int):
    class Power(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            return x ** k

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * k * x ** (k - 1)

    Power.__name__ = Power.__qualname__ = f"Power{k}"
    return Power


Power2, Power3, Power4, Power5, Power6, Power7 = (_power(k) for k in range(2, 8))


#: x[b, n] * w[n], with a generated vmap rule (the test fixture, reused).
ScaleRows = RowScaleBatched

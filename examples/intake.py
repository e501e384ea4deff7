"""Two small models for new-model intake (`audit scan`): a mix of registered and unregistered custom code.

Registered in registry.yaml: LogSumExp and the ``examples::softplus`` op. Not registered: the
``_GeluTanh`` Function inside a submodule, the ``_ScaledAdd`` Function reached only through the
``scaled_residual`` wrapper, the ``_RowNorm`` Function used only without gradients, and the
``intake::rms_scale`` op. All of them are correct: stubs written for them audit green.
"""

from __future__ import annotations

import torch

import examples.library_op  # noqa: F401  (registers examples::softplus)
from examples.logsumexp import LogSumExp


class _GeluTanh(torch.autograd.Function):
    """The tanh approximation of GELU, with its exact derivative."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x):
        return 0.5 * x * (1 + torch.tanh(0.7978845608028654 * (x + 0.044715 * x ** 3)))

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        inner = 0.7978845608028654 * (x + 0.044715 * x ** 3)
        t = torch.tanh(inner)
        d_inner = 0.7978845608028654 * (1 + 3 * 0.044715 * x ** 2)
        return grad * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * d_inner)


class _ScaledAdd(torch.autograd.Function):
    """x + alpha * y."""

    generate_vmap_rule = True

    @staticmethod
    def forward(x, y, alpha):
        return x + alpha * y

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.alpha = inputs[2]

    @staticmethod
    def backward(ctx, grad):
        return grad, grad * ctx.alpha, None


def scaled_residual(x, y, alpha: float = 0.5):
    """The only way the model reaches _ScaledAdd."""
    return _ScaledAdd.apply(x, y, alpha)


class _RowNorm(torch.autograd.Function):
    """Each row's Euclidean norm, smoothed at zero (used for monitoring, under no_grad)."""

    @staticmethod
    def forward(x):
        return (x.pow(2).sum(-1) + 1e-6).sqrt()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0], output)

    @staticmethod
    def backward(ctx, grad):
        x, norm = ctx.saved_tensors
        return grad.unsqueeze(-1) * x / norm.unsqueeze(-1)


@torch.library.custom_op("intake::rms_scale", mutates_args=())
def rms_scale(x: torch.Tensor) -> torch.Tensor:
    """x divided by its root mean square over the last dim (plus 0.01, which bounds the gradient)."""
    return x / (x.pow(2).mean(-1, keepdim=True) + 0.01).sqrt()


@rms_scale.register_fake
def _(x):
    return torch.empty_like(x)


def _rms_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _rms_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    with torch.enable_grad():
        x = x.detach().requires_grad_()
        y = x / (x.pow(2).mean(-1, keepdim=True) + 0.01).sqrt()
        (dx,) = torch.autograd.grad(y, x, grad)
    return dx


rms_scale.register_autograd(_rms_backward, setup_context=_rms_setup)


class FeedForward(torch.nn.Module):
    """The submodule that uses _GeluTanh."""

    def __init__(self, width: int):
        super().__init__()
        self.up, self.down = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)

    def forward(self, x):
        return self.down(_GeluTanh.apply(self.up(x)))


class Block(torch.nn.Module):
    """A transformer-like block: rms_scale, a feed-forward submodule, a scaled residual."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.ff = FeedForward(width)

    def forward(self, x):
        h = torch.ops.intake.rms_scale(x)
        out = scaled_residual(x, self.ff(h))
        with torch.no_grad():
            self.last_norms = _RowNorm.apply(out)
        return out


class MLP(torch.nn.Module):
    """Linear, the registered softplus op, Linear, then the registered LogSumExp."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(4, 6), torch.nn.Linear(6, 3)

    def forward(self, x):
        return LogSumExp.apply(self.b(torch.ops.examples.softplus(self.a(x), 1.0)))


def build_block():
    """``audit scan examples.intake:build_block``: the model and its example inputs."""
    torch.manual_seed(0)
    return Block(), (torch.randn(2, 5, 8),)


def build_mlp():
    """``audit scan examples.intake:build_mlp``."""
    torch.manual_seed(0)
    return MLP(), (torch.randn(3, 4),)

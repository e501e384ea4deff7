"""A complex Function: a frequency-domain filter, y = ifft(fft(z) · h), with its gradients written out in
PyTorch's convention (conjugate Wirtinger: the gradient of a real loss L of z = a + ib is dL/da + i·dL/db).

y is linear in z and in h, so each gradient is the adjoint map applied to the output's gradient g: the
adjoint of the unnormalised DFT is N times the inverse one, so
    grad z = ifft(conj(h) · fft(g))          grad h = conj(fft(z)) · fft(g) / N   (summed over the batch)
"""

from __future__ import annotations

import torch


class SpectralFilter(torch.autograd.Function):
    """Filters complex signals ``z`` [..., N] by the frequency response ``h`` [N] (shared by every signal)."""

    generate_vmap_rule = True

    @staticmethod
    def forward(z: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.fft.ifft(torch.fft.fft(z) * h)

    @staticmethod
    def setup_context(ctx, inputs, output) -> None:
        z, h = inputs
        ctx.save_for_backward(z, h)
        ctx.save_for_forward(z, h)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        z, h = ctx.saved_tensors
        spectrum = torch.fft.fft(grad)
        grad_z = torch.fft.ifft(spectrum * h.conj()) if ctx.needs_input_grad[0] else None
        grad_h = None
        if ctx.needs_input_grad[1]:
            per_signal = torch.fft.fft(z).conj() * spectrum / z.shape[-1]
            grad_h = per_signal.reshape(-1, h.shape[-1]).sum(0).reshape(h.shape)  # h is shared: sum over signals
        return grad_z, grad_h

    @staticmethod
    def jvp(ctx, dz: torch.Tensor, dh: torch.Tensor) -> torch.Tensor:
        z, h = ctx.saved_tensors
        return torch.fft.ifft(torch.fft.fft(dz) * h + torch.fft.fft(z) * dh)


def reference(z: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """The same filter in plain torch ops (autograd derives its gradients)."""
    return torch.fft.ifft(torch.fft.fft(z) * h)

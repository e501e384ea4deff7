"""Tensors as the checks see them: the ones a call returned, detached, widened for comparison, dense, fresh
copies, laid out in memory."""

from __future__ import annotations

import torch


def outputs_of(result) -> list:
    """The tensors a call returned, in order: a tensor, or the tensors of a tuple or list, or a dict's values in its
    order (a module returning ``{"logits": ...}`` as Hugging Face models do)."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, dict):
        result = list(result.values())
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def detached(args) -> list:
    """``args`` with every tensor detached (other values as they are)."""
    return [a.detach() if isinstance(a, torch.Tensor) else a for a in args]


def floating(tensor) -> bool:
    """Whether autograd differentiates ``tensor``'s dtype: real floating or complex."""
    return tensor.is_floating_point() or tensor.is_complex()


def widest(tensor):
    """The dtype to compare ``tensor`` in: complex128 for a complex one, else float64."""
    return torch.complex128 if tensor.is_complex() else torch.float64


def wide(tensor):
    """``tensor`` in float64, or in complex128 if complex: where comparisons are made."""
    return tensor.to(widest(tensor))


def widened(args) -> list:
    """``args`` with every floating tensor detached and in its comparison dtype: how a reference is called."""
    return [wide(a.detach()) if isinstance(a, torch.Tensor) and floating(a) else a for a in args]


def dense(x):
    """``x`` as a strided tensor: a sparse one with zeros where it specifies nothing, a dense one as it is."""
    return x if x.layout == torch.strided else x.to_dense()


def fresh(args) -> list:
    """New leaves with the values of ``args`` (requires_grad kept), so that a target writing its arguments cannot
    change the next call; a transposed layout is kept, a strided or offset one not."""
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def laid_out(x, layout: str):
    """The same values in the named memory layout (transposed, strided, offset, channels_last), a leaf requiring
    grad as ``x`` does; never stride 0. "contiguous", or a layout the shape cannot take, keeps ``x``'s."""
    grad = x.requires_grad
    x = x.detach()
    shape = tuple(x.shape)
    if layout == "transposed" and len(shape) >= 2:
        dims = list(reversed(range(len(shape))))
        y = torch.empty(shape[::-1], dtype=x.dtype, device=x.device).permute(*dims)
    elif layout == "strided" and shape:
        y = torch.zeros(shape[:-1] + (2 * shape[-1],), dtype=x.dtype, device=x.device)[..., ::2]
    elif layout == "offset":  # the gaps are zeros: code that ignores strides reads the same values in every run
        y = torch.zeros(x.numel() + 3, dtype=x.dtype, device=x.device)[3:].view(shape)
    elif layout == "channels_last" and len(shape) == 4:
        y = torch.empty(shape, dtype=x.dtype, device=x.device).contiguous(memory_format=torch.channels_last)
    else:
        return x.requires_grad_(grad)
    with torch.no_grad():
        y.copy_(x)
    return y.requires_grad_(grad)


def cotangents_laid_out(cotangents, layout: str) -> list:
    """Cotangents in the layout a check hands to backward: "expanded" (stride 0: one value broadcast), "expanded
    values" (that value, dense), or a memory layout (a 1-d one offset: it cannot be transposed)."""
    if layout in ("expanded", "expanded values"):
        found = [c.reshape(-1)[:1].expand(c.shape) if c.numel() and c.dim() else c for c in cotangents]
        return [c.contiguous() for c in found] if layout == "expanded values" else found
    return [laid_out(c, layout if c.dim() >= (2 if layout == "transposed" else 1) else "offset") for c in cotangents]

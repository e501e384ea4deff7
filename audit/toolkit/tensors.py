"""Tensor helpers shared by the checks: outputs, gradients and comparisons with a located maximum."""

from __future__ import annotations

import math

import torch

from audit.registry.model import Tolerance
from audit.toolkit.violation import Violation


def outputs_of(result) -> list[torch.Tensor]:
    """The tensors a call returned, in order (a tensor, or the tensors of a tuple or list)."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def detached(args) -> list:
    """``args`` with every tensor detached (other values as they are)."""
    return [a.detach() if isinstance(a, torch.Tensor) else a for a in args]


def floating(tensor: torch.Tensor) -> bool:
    """Whether autograd differentiates ``tensor``'s dtype: real floating or complex."""
    return tensor.is_floating_point() or tensor.is_complex()


def widest(tensor: torch.Tensor) -> torch.dtype:
    """The dtype to compare ``tensor`` in: complex128 for a complex one, else float64."""
    return torch.complex128 if tensor.is_complex() else torch.float64


def wide(tensor: torch.Tensor) -> torch.Tensor:
    """``tensor`` in float64, or in complex128 if complex: where comparisons are made."""
    return tensor.to(widest(tensor))


def differentiable(tensors) -> list[torch.Tensor]:
    """The floating (or complex) tensors that take part in autograd."""
    return [t for t in tensors if floating(t) and t.requires_grad]


def grad_outputs(outputs, seed: int) -> list[torch.Tensor]:
    """Deterministic random cotangents, one per output, in each output's dtype and device: drawn in float64,
    in complex128 for a complex output (a real cotangent would leave its imaginary part unexamined)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o.dtype).to(o.device)
            for o in outputs]


def vjp(fn, args, inputs, seed: int = 0, *, create_graph: bool = False):
    """Outputs of ``fn(*args)`` and the gradients of <outputs, random cotangents> w.r.t. ``inputs``."""
    outputs = differentiable(outputs_of(fn(*args)))
    if not outputs:
        raise Violation("returned no differentiable output: nothing carries a gradient back")
    cotangents = grad_outputs(outputs, seed)
    grads = torch.autograd.grad(outputs, inputs, cotangents, allow_unused=True, create_graph=create_graph)
    return outputs, filled(grads, inputs)


def gradients(outputs, args, seed: int) -> list[torch.Tensor]:
    """Gradients of <differentiable outputs, random cotangents> for each argument that requires grad
    (zeros where unused); empty when nothing is differentiable."""
    inputs = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    chosen = differentiable(outputs)
    if not (inputs and chosen):
        return []
    return filled(torch.autograd.grad(chosen, inputs, grad_outputs(chosen, seed), allow_unused=True), inputs)


def filled(grads, inputs) -> list[torch.Tensor]:
    """Gradients with each ``None`` (input unused) replaced by zeros of the input's shape."""
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def mismatch(got: torch.Tensor, expected: torch.Tensor, tol: Tolerance, magnitude: float = 0.0) -> str | None:
    """Why ``got`` is not close to ``expected`` (largest error and where), or None when it is; sparse tensors
    compare by their dense values (zeros where unspecified). ``tol.scale`` applies to the largest |expected|,
    or to ``magnitude`` (the largest value its computation passed through, :mod:`audit.toolkit.rounding`)
    when that is larger."""
    got, expected = dense(got), dense(expected)
    if got.shape != expected.shape:
        return f"shape {list(got.shape)} != expected {list(expected.shape)}"
    if got.numel() == 0:
        return None
    wide = torch.complex128 if got.is_complex() or expected.is_complex() else torch.float64
    got64, exp64 = got.detach().to(wide).cpu(), expected.detach().to(wide).cpu()  # complex: |difference| is the modulus
    if within(got64, exp64, tol, magnitude):
        return None
    nan_mismatch = torch.isnan(got64) != torch.isnan(exp64)
    if nan_mismatch.any():
        return _nan_mismatch(got64, exp64, nan_mismatch, got.shape)
    both_nan = torch.isnan(got64) & torch.isnan(exp64)
    same = both_nan | (got64 == exp64)  # equal infinities are equal
    error = (got64 - exp64).abs().masked_fill(same, 0.0)
    error = error.nan_to_num(nan=float("inf"))
    size = exp64.abs().nan_to_num(nan=0.0, posinf=0.0)
    own = size.max().item() if tol.scale else 0.0
    largest = max(own, magnitude)
    floor = tol.atol + tol.scale * largest
    allowed = floor + tol.rtol * size
    excess = (error - allowed).masked_fill(same, -1.0)
    if not (excess > 0).any():
        return None
    index = _index(excess, got.shape)
    flat = excess.reshape(-1).argmax()
    return (f"max |got - expected| = {error.reshape(-1)[flat].item():.3g} at index {index} "
            f"(got {got64.reshape(-1)[flat].item():.6g}, expected {exp64.reshape(-1)[flat].item():.6g}); "
            f"allowed {_allowance(tol, floor, magnitude > own)} + rtol {tol.rtol:g}·|expected|")


def within(got64: torch.Tensor, exp64: torch.Tensor, tol: Tolerance, magnitude: float = 0.0) -> bool:
    """The common case of :func:`mismatch` in a few operations: every element within its allowance and every
    expected value finite. False sends the comparison the full way, which treats NaN and infinities (equal
    ones are equal, one-sided NaN is named) and says where the largest error is; it never turns a failure
    into a pass, since its allowance is the same and a finite expected tensor is all it accepts."""
    size = exp64.abs()
    largest = size.max().item()
    if not math.isfinite(largest):
        return False
    allowed = tol.atol + tol.scale * max(largest if tol.scale else 0.0, magnitude) + tol.rtol * size
    return bool(((got64 - exp64).abs() <= allowed).all())


def _allowance(tol: Tolerance, floor: float, of_run: bool) -> str:
    """The absolute part of the allowance, with its scale term when there is one."""
    if not tol.scale:
        return f"atol {tol.atol:g}"
    of = "the largest value computed in float64" if of_run else "max|expected|"
    return f"atol {tol.atol:g} + scale {tol.scale:g}·{of} (= {floor:.3g})"


def _nan_mismatch(got64, exp64, where, shape) -> str:
    """Which side is NaN where the other is not, at the first such element, and how many there are."""
    flat = int(where.reshape(-1).int().argmax())
    got_value, expected_value = (_number(t.reshape(-1)[flat].item()) for t in (got64, exp64))
    return (f"got {got_value} where expected {expected_value} at index {_index(where.int(), shape)} "
            f"(NaN on one side only in {int(where.sum())} of {where.numel()} elements)")


def _number(value: float) -> str:
    return "NaN" if value != value else f"{value:.6g}"


def _index(scores: torch.Tensor, shape) -> tuple:
    flat = int(scores.reshape(-1).argmax())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) if shape else ()


def dense(x: torch.Tensor) -> torch.Tensor:
    """``x`` as a strided tensor: a sparse one with zeros where it specifies nothing, a dense one as it is."""
    return x if x.layout == torch.strided else x.to_dense()


def compare_all(label: str, got, expected, tol: Tolerance, magnitude: float = 0.0) -> None:
    """Raise :class:`Violation` naming the first of ``got`` that is not close to ``expected`` (``magnitude``:
    see :func:`mismatch`)."""
    if len(got) != len(expected):
        raise Violation(f"{label}: {len(got)} tensors, expected {len(expected)}")
    for i, (g, e) in enumerate(zip(got, expected)):
        problem = mismatch(g, e, tol, magnitude)
        if problem:
            raise Violation(f"{label} {i}: {problem}")


def grad_inputs(args: list) -> list[torch.Tensor]:
    """The arguments a gradient is taken with respect to."""
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]

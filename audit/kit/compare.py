"""Comparing results: the allowance of a tolerance, located and sized mismatches, findings and their families,
and where a reference says nothing."""

from __future__ import annotations

import math
import torch
from audit.kit.tensors import dense


class Finding(str):
    """A property's message that also says what kind of failure it is, without by how much: ``kind`` with where
    ("output 0", "gradient of input 1"), into which the audit shrinks a failure (only cases of the same kind), and
    ``family`` without where ("gradient of input"): what a check's judgement decides by, so that no verdict reads a
    message's wording (the constants below name the families a judgement keys on)."""

    kind: str
    family: str

    def __new__(cls, message: str, kind: str, family: str = ""):
        found = super().__new__(cls, message)
        found.kind, found.family = kind, family or kind
        return found

    def worded(self, message: str) -> Finding:
        """The same finding said in other words (more said around it, a mode named)."""
        return Finding(message, self.kind, self.family)


#: Families of findings that a check's judgement decides by (:class:`Finding`): a Jacobian against finite
#: differences (a point without a derivative may excuse it), jacfwd's all-zero Jacobian, torch.func refusing an
#: autograd.Function called inside the target (for an op: PyTorch's own bug), a jvp off finite differences or off
#: the reference's, and a compiled gradient off eager's.
JACREV_VS_DIFFERENCES = "jacrev vs finite differences"


JACFWD_VS_DIFFERENCES = "jacfwd vs finite differences"


JACFWD_ALL_ZERO = "jacfwd gave an all-zero Jacobian"


REFUSED_INSIDE = "torch.func refuses an autograd.Function called inside"


FORWARD_AD_MISMATCH = "forward-mode AD"


COMPILED_GRADIENT = "compiled gradient of input"


def mismatch(got, expected, tol, magnitude: float = 0.0) -> str | None:
    """Why ``got`` is not close to ``expected`` (largest error and where), or None when it is; sparse tensors
    compare by their dense values. ``tol`` has ``atol``, ``rtol`` and ``scale``: the allowance is
    atol + scale·max(max|expected|, magnitude) + rtol·|expected| (``magnitude``: the largest value the computation
    passed through, :func:`largest_value`, where measured)."""
    got, expected = dense(got), dense(expected)
    if got.shape != expected.shape:
        return f"shape {list(got.shape)} != expected {list(expected.shape)}"
    if got.numel() == 0:
        return None
    kind = torch.complex128 if got.is_complex() or expected.is_complex() else torch.float64
    got64, exp64 = got.detach().to(kind).cpu(), expected.detach().to(kind).cpu()  # complex: |difference| is the modulus
    if within(got64, exp64, tol, magnitude):
        return None
    nan_mismatch = torch.isnan(got64) != torch.isnan(exp64)
    if nan_mismatch.any():
        return _nan_mismatch(got64, exp64, nan_mismatch, got.shape)
    same = (torch.isnan(got64) & torch.isnan(exp64)) | (got64 == exp64)  # equal infinities are equal
    error = (got64 - exp64).abs().masked_fill(same, 0.0).nan_to_num(nan=float("inf"))
    size = exp64.abs().nan_to_num(nan=0.0, posinf=0.0)
    own = size.max().item() if tol.scale else 0.0
    floor = tol.atol + tol.scale * max(own, magnitude)
    excess = (error - (floor + tol.rtol * size)).masked_fill(same, -1.0)
    if not (excess > 0).any():
        return None
    flat = excess.reshape(-1).argmax()
    return (f"max |got - expected| = {error.reshape(-1)[flat].item():.3g} at index {_index(excess, got.shape)} "
            f"(got {got64.reshape(-1)[flat].item():.6g}, expected {exp64.reshape(-1)[flat].item():.6g}); "
            f"allowed {_allowance(tol, floor, magnitude > own)} + rtol {tol.rtol:g}·|expected|")


def within(got64, exp64, tol, magnitude: float = 0.0) -> bool:
    """The common case of :func:`mismatch` in a few operations: every element within its allowance and every
    expected value finite. False sends the comparison the full way, which treats NaN and infinities (equal ones
    are equal, one-sided NaN is named) and says where the largest error is; it never turns a failure into a
    pass, since its allowance is the same and a finite expected tensor is all it accepts."""
    size = exp64.abs()
    largest = size.max().item()
    if not math.isfinite(largest):
        return False
    allowed = tol.atol + tol.scale * max(largest if tol.scale else 0.0, magnitude) + tol.rtol * size
    return bool(((got64 - exp64).abs() <= allowed).all())


def _allowance(tol, floor: float, of_run: bool) -> str:
    """The absolute part of the allowance, with its scale term when there is one."""
    if not tol.scale:
        return f"atol {tol.atol:g}"
    of = "the largest value computed in float64" if of_run else "max|expected|"
    return f"atol {tol.atol:g} + scale {tol.scale:g}·{of} (= {floor:.3g})"


def _nan_mismatch(got64, exp64, where, shape) -> str:
    """Which side is NaN where the other is not, at the first such element, and how many there are."""
    flat = int(where.reshape(-1).int().argmax())
    got_value, expected_value = (number(t.reshape(-1)[flat].item()) for t in (got64, exp64))
    return (f"got {got_value} where expected {expected_value} at index {_index(where.int(), shape)} "
            f"(NaN on one side only in {int(where.sum())} of {where.numel()} elements)")


def number(value) -> str:
    """A float as a message shows it: NaN, or 6 significant digits."""
    return "NaN" if value != value else f"{value:.6g}"


def _index(scores, shape) -> tuple:
    flat = int(scores.reshape(-1).argmax())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) if shape else ()


def mismatches(label: str, got, expected, tol, magnitude: float = 0.0) -> list:
    """One line per tensor of ``got`` not close to ``expected`` ("<label> <i>: <why>"), or for a count that
    differs; [] when all are close (``magnitude``: see :func:`mismatch`)."""
    if len(got) != len(expected):
        return [f"{label}: {len(got)} tensors, expected {len(expected)}"]
    found = [(i, mismatch(g, e, tol, magnitude)) for i, (g, e) in enumerate(zip(got, expected))]
    return [Finding(f"{label} {i}: {problem}", f"{label} {i}", label) for i, problem in found if problem]


def undefined_where(got, expected):
    """Where ``expected`` (the reference's) is NaN or inf and ``got`` (the target's) is finite, as a bool tensor
    (a 0-d False where the shapes differ: that mismatch is the comparison's to report)."""
    got, expected = dense(got), dense(expected)
    if got.shape != expected.shape:
        return torch.zeros((), dtype=torch.bool)
    return ~torch.isfinite(expected.detach().cpu()) & torch.isfinite(got.detach().cpu())


def defined_only(got, expected, observe=None, label: str = "") -> list:
    """``expected`` with ``got``'s element wherever the reference is undefined (:func:`undefined_where`): an
    inconclusive comparison there, so none is made. ``observe(label, got, expected, masks)``, if given, is told
    where that happened (the audit counts such examples in the cell's metrics)."""
    masks = [undefined_where(g, e) for g, e in zip(got, expected)]
    if observe is not None and any(m.any() for m in masks):
        observe(label, got, expected, masks)
    kept = []
    for g, e, mask in zip(got, expected, masks):
        if mask.any():
            e = torch.where(mask.to(e.device), g.detach().to_dense().to(e.dtype), e.to_dense())
        kept.append(e)
    return kept

"""Comparing with the entry's reference where the reference itself says nothing: an undefined value or
gradient (NaN or inf where the target's is finite), or an exception of its own.

A reference is a second implementation, not the truth. An ``eigh``-based matrix square root has a NaN
gradient at a repeated eigenvalue, where the function (and a correct hand-written backward) is smooth:
there the comparison is inconclusive, and the target's gradient is judged by finite differences and the
smoothness probe instead. It fails only where finite differences disagree at a smooth point. Each such
example is counted in the cell's ``metrics.reference_undefined``.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from audit.checks import smoothness
from audit.contract import real_counterpart
from audit.errors import first_line
from audit.frames import user_site
from audit.toolkit.jacobian import _EPS, gradcheck_tolerance
from audit.toolkit.tensors import dense, grad_outputs, outputs_of, wide
from audit.toolkit.violation import Violation

#: Flagged gradient elements judged by finite differences per example, at most; past it they go unjudged.
MAX_JUDGED = 16


@contextmanager
def blamed():
    """An exception raised inside the reference (its forward or its backward) named as the reference's, not
    the target's: a :class:`Violation` saying "the reference raised ..."."""
    try:
        yield
    except MemoryError:
        raise
    except Violation as exc:
        if str(exc).startswith("the reference"):
            raise
        raise Violation(f"the reference {exc}{_ADVICE}") from None
    except Exception as exc:
        if "can't allocate memory" in str(exc):
            raise
        raise Violation(f"the reference raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}"
                        f"{_ADVICE}") from exc


_ADVICE = " (the entry's `reference`, not the target: fix the reference, or narrow `domain`)"


def undefined_where(got, expected) -> list[torch.Tensor]:
    """Per pair, a bool mask of where ``expected`` is NaN or inf and ``got`` is finite (empty masks when the
    shapes differ: that mismatch is the comparison's to report)."""
    masks = []
    for g, e in zip(got, expected):
        g, e = dense(g).detach().cpu(), dense(e).detach().cpu()
        masks.append(~torch.isfinite(e) & torch.isfinite(g) if g.shape == e.shape else torch.zeros(0, dtype=torch.bool))
    return masks


def defined_only(got, expected, masks) -> list[torch.Tensor]:
    """``expected`` with each masked element replaced by ``got``'s: not compared there."""
    kept = []
    for g, e, m in zip(got, expected, masks):
        if m.numel() and m.any():
            e = torch.where(m.to(e.device), dense(g).detach().to(e.dtype), dense(e))
        kept.append(e)
    return kept


def outputs_defined(subject, case, check: str, outputs, expected) -> list[torch.Tensor]:
    """``expected`` (the reference's outputs) where it is defined, the target's ``outputs`` elsewhere; where
    the reference's value is undefined, there is nothing to compare the target's with (noted)."""
    masks = undefined_where(outputs, expected)
    if any(m.numel() and m.any() for m in masks):
        note(subject, case, check, "output", outputs, expected, masks, "not compared there")
    return defined_only(outputs, expected, masks)


def gradients_defined(subject, case, check: str, fn, inputs, grads, expected, *, judged: bool = False):
    """``expected`` (the reference's gradients) where it is defined, the target's ``grads`` elsewhere, after
    judging the target's gradient there by finite differences (a :class:`Violation` where they disagree at
    a smooth point). ``judged``: the caller already compared the target with finite differences at this
    example (gradcheck held), so it is not done again."""
    masks = undefined_where(grads, expected)
    if not any(m.numel() and m.any() for m in masks):
        return expected
    if not judged:
        _judge_by_differences(subject, case, check, fn, inputs, grads, masks)
    note(subject, case, check, "gradient of input", grads, expected, masks,
         "the target's gradient judged by finite differences there")
    return defined_only(grads, expected, masks)


def _judge_by_differences(subject, case, check, fn, inputs, grads, masks) -> None:
    """The target's vector-Jacobian product at each masked element against central differences of
    <cotangents, fn(x)>; a disagreement at a point where ``fn`` is smooth along that element fails."""
    loss = _loss(fn, inputs, subject.seed)
    eps = _EPS[real_counterpart(subject.dtype)]
    atol, rtol = gradcheck_tolerance(subject)
    places = [(i, int(k)) for i, m in enumerate(masks) if m.numel() for k in m.reshape(-1).nonzero().reshape(-1)]
    for i, k in places[:MAX_JUDGED]:
        if inputs[i].is_complex() or inputs[i].layout != torch.strided:
            continue  # judged as real coordinates only
        numeric = _central(loss, inputs, i, k, eps)
        analytic = float(wide(grads[i].detach()).reshape(-1)[k])
        if abs(analytic - numeric) <= atol + rtol * abs(numeric):
            continue
        if smoothness.kink_at(loss, [x.detach() for x in inputs], i, k, eps, atol, rtol) is not None:
            continue
        raise Violation(f"{check}: the reference's gradient is undefined at input {i} index "
                        f"{_index(k, inputs[i].shape)}, and there the target's (analytic {analytic:.6g}) disagrees "
                        f"with finite differences (numeric {numeric:.6g}) at a point where the function is smooth")


def _loss(fn, inputs, seed: int):
    """<fixed random cotangents, fn(xs)> as a function of ``xs``: a one-output function whose gradient is the
    vector-Jacobian product the checks compare (the same cotangents, on the outputs that carry a gradient)."""
    with torch.enable_grad():
        outs = outputs_of(fn(*[x.detach().requires_grad_() for x in inputs]))
    kept = [j for j, o in enumerate(outs) if o.requires_grad]
    cotangents = grad_outputs([outs[j].detach() for j in kept], seed)

    def loss(*xs):
        found = outputs_of(fn(*xs))
        return sum(((c.conj() * found[j]).real.double().sum() for c, j in zip(cotangents, kept)),
                   torch.zeros((), dtype=torch.float64))

    return loss


def _central(loss, inputs, i: int, k: int, eps: float) -> float:
    values = []
    for h in (eps, -eps):
        xs = [x.detach().clone() for x in inputs]
        xs[i].view(-1)[k] += h
        with torch.no_grad():
            values.append(float(loss(*xs)))
    return (values[0] - values[1]) / (2 * eps)


def note(subject, case, check: str, label: str, got, expected, masks, verdict: str) -> None:
    """Count the example in the cell's ``metrics.reference_undefined``; the first one says where."""
    seen = subject.metrics.setdefault("reference_undefined", {"examples": 0})
    seen["examples"] += 1
    if "first" in seen:
        return
    n = next(j for j, m in enumerate(masks) if m.numel() and m.any())
    k = int(masks[n].reshape(-1).nonzero()[0])
    theirs, mine = (wide(dense(t[n]).detach()).reshape(-1)[k] for t in (expected, got))
    count = sum(int(m.sum()) for m in masks if m.numel())
    seen["first"] = (f"{check}: the reference's {label} {n} is {_number(theirs)} at index {_index(k, got[n].shape)} "
                     f"where the target's is {_number(mine)}, on {case.describe()}: the reference is undefined "
                     f"there, an inconclusive comparison, {verdict} ({count} elements)")


def _number(value: torch.Tensor) -> str:
    """An element as a message shows it: NaN, inf, -inf, or 6 significant digits (complex: both parts)."""
    if bool(torch.isnan(value)):
        return "NaN"
    number = complex(value) if value.is_complex() else float(value)
    return f"{number:.6g}"


def _index(flat: int, shape) -> list:
    return [int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))] if len(shape) else []

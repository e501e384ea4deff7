"""Comparing with the entry's reference where the reference itself says nothing: an undefined value or
gradient (NaN or inf where the target's is finite), or an exception of its own.

A reference is a second implementation, not the truth. An ``eigh``-based matrix square root has a NaN
gradient at a repeated eigenvalue, where the function (and a correct hand-written backward) is smooth:
there the comparison is inconclusive, and the target's gradient is judged by finite differences (torch's
gradcheck) and the smoothness probe instead. It fails only where finite differences disagree at a smooth
point. Each such example is counted in the cell's ``metrics.reference_undefined``. The replay scripts embed
:func:`undefined_where` and :func:`defined_only`, so that they compare as the checks do.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from audit.checking import smoothness
from audit.core.errors import first_line
from audit.kit.autograd import grad_inputs, grad_outputs, gradients, vjp
from audit.kit.explain import judged_by_differences, user_site
from audit.kit.tensors import dense, outputs_of, wide
from audit.toolkit.jacobian import gradcheck_options, wrap
from audit.core.violation import Violation


class ReferenceFailed(Violation):
    """What the reference raised, named as the reference's (:func:`blamed`): an outer :func:`blamed` passes it on
    as it is."""


@contextmanager
def blamed():
    """An exception raised inside the reference (its forward or its backward) named as the reference's, not
    the target's: a :class:`ReferenceFailed` saying "the reference raised ..."."""
    try:
        yield
    except (MemoryError, ReferenceFailed):
        raise
    except Violation as exc:
        raise ReferenceFailed(f"the reference {exc}{_ADVICE}") from None
    except Exception as exc:
        if "can't allocate memory" in str(exc):
            raise
        raise ReferenceFailed(f"the reference raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}"
                              f"{_ADVICE}") from exc


_ADVICE = " (the entry's `reference`, not the target: fix the reference, or narrow `domain`)"


@contextmanager
def blamed_if_it_raises(subject, args_of):
    """An exception raised inside (by a property that differentiates the reference as well as the target: autograd
    runs both backwards outside either's call) named as the reference's (:func:`blamed`) when the reference's own
    forward and backward, cotangents drawn from the cell's seed, raise on ``args_of()`` too; else it stands."""
    try:
        yield
    except Exception:
        args = args_of()
        with blamed():
            gradients(outputs_of(subject.evaluate_reference(*args)), args, subject.seed)
        raise


def judge_by_differences(subject, case, check: str, fn, inputs) -> None:
    """Torch's gradcheck on ``fn`` at ``inputs``, a failure excused only where ``fn`` has no derivative: a
    :class:`Violation` naming the reference as undefined or unreliable here
    (:func:`audit.kit.explain.judged_by_differences`)."""
    options = gradcheck_options(subject, inputs)
    found = judged_by_differences(check, fn, inputs, options)
    if found and not smoothness.excused(subject, check, case, fn, inputs, options["eps"]):
        raise Violation(found[0])


def unreliable(subject, case, check: str, args) -> bool:
    """Whether the reference's own gradient cannot be trusted on ``args`` (noted when so): it disagrees with finite
    differences at gradcheck's tolerance (near a repeated eigenvalue an ``eigh``-based reference's gradient is finite
    but wrong), or, in a float64 cell, its own error here (:func:`gradient_error`) is as large as the target's
    difference from it (:data:`UNDECIDED_FACTOR`): a comparison with it says nothing. Asked only once the target's
    gradient differs from the reference's after passing finite differences itself."""
    inputs = grad_inputs(args)
    fn = wrap(subject, args, lambda full: subject.evaluate_reference(*full))
    options = gradcheck_options(subject, inputs)
    with blamed():
        held = torch.autograd.gradcheck(fn, inputs, raise_exception=False, **options)
    if not held:
        _noted(subject, f"{check}: the reference's own gradient disagrees with finite differences on "
                        f"{case.describe()} (ill-conditioned there): an inconclusive comparison, the target's "
                        "gradient judged by finite differences (gradcheck held)")
        return True
    return _undecided(subject, case, check, args)


#: The reference cannot decide where the target differs from it by at most this many times the reference's own
#: gradient error (:func:`gradient_error`): measured on an eigh-based square root at eigenvalue gaps of 1e-7 to 1e-11,
#: the exact target's difference from the reference was 1.0x to 1.4x that error; at a well-separated point the error
#: is the finite differences' own (3e-11 of a gradient of 0.5), so a target off by 1e-8 relative still fails.
UNDECIDED_FACTOR = 4
#: Central-difference steps, relative to the input's largest magnitude: the smallest disagreement over them is the
#: reference's error (truncation shrinks with the step, rounding grows).
STEPS = (1e-4, 1e-5, 1e-6, 1e-7)


def _undecided(subject, case, check: str, args) -> bool:
    """In a float64 (complex128: not measured) cell, whether the target's gradient differs from the reference's by no
    more than :data:`UNDECIDED_FACTOR` times the reference's own gradient error at ``args`` (noted when so)."""
    if subject.dtype != "float64" or any(a.layout != torch.strided for a in grad_inputs(args)):
        return False
    with blamed():
        error = gradient_error(subject.evaluate_reference, args, subject.seed)
    if not error:
        return False
    found = max((float((a - b).abs().max()) for a, b in zip(gradients(outputs_of(subject.evaluate(*args)), args,
                                                                      subject.seed),
                                                            _reference_gradients(subject, args)) if a.numel()),
                default=0.0)
    if found > UNDECIDED_FACTOR * error:
        return False
    _noted(subject, f"{check}: the reference cannot decide on {case.describe()}: its own gradient is off its own "
                    f"finite differences by up to {error:.3g} there (ill-conditioned, though its values are not), "
                    f"and the target differs from it by {found:.3g}; the target's gradient judged by finite "
                    "differences (gradcheck held)")
    return True


def _reference_gradients(subject, args) -> list:
    return gradients(outputs_of(subject.evaluate_reference(*args)), args, subject.seed)


def gradient_error(reference, args, seed: int) -> float:
    """How far ``reference``'s VJP (cotangents drawn from ``seed``) can be trusted at ``args``, from the reference
    alone: the largest, over the input elements, of the smallest disagreement between its VJP and the central
    differences of <its outputs, the cotangents> over :data:`STEPS`. Its forward can be accurate where its backward
    is not (eigh's divides by eigenvalue gaps): this measures the backward. 0 where nothing is differentiable."""
    inputs = grad_inputs(args)
    everything = outputs_of(reference(*args))
    positions = [i for i, o in enumerate(everything) if o.requires_grad]
    outputs = [everything[i] for i in positions]
    if not (inputs and outputs) or any(x.is_complex() for x in inputs):
        return 0.0
    cotangents = grad_outputs(outputs, seed)
    grads = vjp(outputs, inputs, cotangents)
    worst = 0.0
    for x, grad in zip(inputs, grads):
        scale = float(x.detach().abs().max()) or 1.0
        for k in range(x.numel()):
            closest = min(abs(_central(reference, args, x, k, step * scale, dict(zip(positions, cotangents)))
                              - float(grad.reshape(-1)[k])) for step in STEPS)
            worst = max(worst, closest)
    return worst


def _central(reference, args, x, k: int, h: float, cotangents: dict) -> float:
    """The central difference of <reference(args), cotangents> (by output position) along element ``k`` of the
    argument ``x``."""
    def at(sign: float) -> float:
        moved = x.detach().clone()
        moved.reshape(-1)[k] += sign * h
        full = [moved if a is x else (a.detach() if isinstance(a, torch.Tensor) else a) for a in args]
        with torch.no_grad():
            outputs = outputs_of(reference(*full))
            return sum(float((outputs[i] * c).sum()) for i, c in cotangents.items())

    return (at(1.0) - at(-1.0)) / (2 * h)


def _noted(subject, first: str) -> None:
    seen = subject.metrics.setdefault("reference_undefined", {"examples": 0})
    seen["examples"] += 1
    seen.setdefault("first", first)


def note(subject, case, check: str, label: str, got, expected, masks, verdict: str) -> None:
    """Count the example in the cell's ``metrics.reference_undefined``; the first one says where."""
    seen = subject.metrics.setdefault("reference_undefined", {"examples": 0})
    seen["examples"] += 1
    if "first" in seen:
        return
    n = next(j for j, m in enumerate(masks) if m.any())
    k = int(masks[n].reshape(-1).nonzero()[0])
    theirs, mine = (wide(dense(t[n]).detach()).reshape(-1)[k] for t in (expected, got))
    count = sum(int(m.sum()) for m in masks)
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

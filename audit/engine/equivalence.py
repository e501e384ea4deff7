"""Does a mutant change anything? Its target against the original's on seeded inputs, before any check runs.

The mutant and the original are called on the same few dozen inputs (drawn from the entry's domain and dims, then
from a mirrored domain, from wider dims and with other fixed values), in the entry's widest claimed dtype:
outputs, vector-Jacobian products with seeded cotangents, forward-mode tangents and second-order products where
the original has them. Where every one agrees (to float64's rounding), the mutant is ``equivalent`` and no check
runs on it; where the mutated code never ran, it is ``not reached``. Otherwise where it differs (which inputs,
which order, by how much) is what :mod:`audit.mutate` turns into a suggestion when the claimed checks let it
survive.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch
from audit.core.contract import DTYPE_ORDER
from audit.engine.explore import given_cases
from audit.inputs.case import Case
from audit.inputs.strategies import cases
from audit.kit.autograd import differentiable, grad_inputs, grad_outputs, tangents, vjp
from audit.kit.proxy import second_order
from audit.kit.tensors import outputs_of
from audit.registry.model import Entry, TensorSpec, ValueSpec
from audit.results.kinds import ErrorKind
from audit.results.outcome import CellKey, Outcome, Verdict, error_outcome
from audit.runtime.mutant import PROBE, Swap
from audit.runtime.options import RunOptions
from audit.runtime.subject import Subject
from audit.runtime.target import Target

#: Inputs drawn per input set (registered, mirrored domain, wider dims).
EXAMPLES = 16
#: Two results agree within this relative (and absolute, scaled by the result's size) difference.
AGREE = 1e-9
#: The quantities compared, in the order a difference is reported.
QUANTITIES = ("output", "gradient", "tangent", "second order")


def probe_key(entry: Entry) -> CellKey:
    """The probe's cell: at the dtype it compares in, on the CPU."""
    return CellKey(PROBE, compared_dtype(entry), "cpu")


def compared_dtype(entry: Entry) -> str:
    """The widest real dtype the entry claims (float64 where it does)."""
    claimed = [d for d in DTYPE_ORDER if d in entry.supports.dtypes and not d.startswith("complex")]
    return claimed[0] if claimed else entry.supports.dtypes[0]


def probe(entry: Entry, target: Target, swap: Swap, key: CellKey, options: RunOptions, seed_value: int) -> Outcome:
    """The probe's outcome: ``held`` with ``details.differs`` when the mutant changes a result on the registered
    inputs; ``skipped`` saying ``equivalent`` or ``not reached`` otherwise, with ``details.differs`` naming what
    differs on inputs outside the registration (mirrored domain, wider dims) where anything does."""
    subject = Subject(entry, target, key.dtype, key.device, seed_value, options)
    seen: list[bool] = []
    found: dict[str, dict[str, Any]] = {}
    try:
        for name, variant, empty in _input_sets(entry):
            if name in found:
                continue
            for case in _drawn(variant, seed_value, empty):
                with swap.watched(seen):
                    difference = _compare(subject, case, swap, seed_value)
                if difference:
                    found.setdefault(name, difference)
                    break
    except Exception as exc:  # the probe's own failure: the checks still decide
        return error_outcome(key, f"the equivalence probe failed: {type(exc).__name__}: {exc}",
                             ErrorKind.AUDIT_FAILED)
    details = {"differs": found, "reached": bool(seen)}
    if "registered" in found:
        return Outcome(key, Verdict.HELD, f"differs on the registered inputs: {_said(found['registered'])}",
                       details=details)
    if not seen:
        return Outcome(key, Verdict.SKIPPED, "not reached: the mutated function never ran on the entry's inputs",
                       details=details)
    if found:
        outside = "; ".join(f"{name}: {_said(d)}" for name, d in found.items())
        return Outcome(key, Verdict.HELD, f"agrees on the registered inputs; differs outside them ({outside})",
                       details=details)
    return Outcome(key, Verdict.SKIPPED, "equivalent: every output, gradient and tangent agreed on "
                   f"{EXAMPLES} inputs per set (registered, mirrored domain, wider dims, other values)",
                   details=details)


def _said(difference: dict[str, Any]) -> str:
    return (f"the {difference['quantity']} differs by {difference['relative']:.3g} (relative) at "
            f"{difference['case']}")


def _input_sets(entry: Entry) -> list[tuple[str, Entry, bool]]:
    """The registered entry (and its empty inputs, where a dim may be 0), then its domain mirrored about 0, its
    dims widened (each to at least 17), and its fixed float values changed (:func:`_other`)."""
    sets = [("registered", entry, False)]
    if any(low == 0 for _, low, _ in entry.dims):  # the empty inputs the registration allows (the empty check's)
        sets.append(("registered", entry, True))
    mirrored = tuple(replace(spec, domain=(min(spec.domain[0], -spec.domain[1]), max(spec.domain[1], -spec.domain[0])))
                     if isinstance(spec, TensorSpec) and not spec.kinks else spec for spec in entry.inputs)
    if mirrored != entry.inputs:
        sets.append(("mirrored domain", replace(entry, inputs=mirrored), False))
    wider = tuple((name, low, max(high, 17) if name != entry.batch else high) for name, low, high in entry.dims)
    if wider != entry.dims:
        sets.append(("wider dims", replace(entry, dims=wider), False))
    other = tuple(replace(spec, value=_other(spec.value)) if isinstance(spec, ValueSpec) else spec
                  for spec in entry.inputs)
    if other != entry.inputs:
        sets.append(("other values", replace(entry, inputs=other), False))
    return sets


def _other(value: object) -> object:
    """Another value of a fixed ``value:`` float input (x1.5, or 0.5 for 0): a mutant equal to the original only at
    the registered value (``alpha / 2`` and ``2 / alpha`` at 2) differs there. Other values stay."""
    if isinstance(value, float):
        return value * 1.5 if value else 0.5
    return value


def _drawn(entry: Entry, seed_value: int, empty: bool = False) -> list[Case]:
    """:data:`EXAMPLES` cases of ``entry`` (``empty``: with one dim that may be 0 at 0), the same for the same
    seed."""
    drawn: list[Case] = []

    def keep(case: Case) -> None:
        drawn.append(case)

    given_cases(keep, cases(entry, empty=empty), EXAMPLES, seed_value, shrink=False)()
    return drawn


def _compare(subject: Subject, case: Case, swap: Swap, seed_value: int) -> dict[str, Any] | None:
    """How the mutant's results differ from the original's on ``case`` (the first quantity that differs), or
    None where they agree or the original itself raises there."""
    original = _results(subject, case, swap, False, seed_value)
    if original is None:
        return None
    mutated = _results(subject, case, swap, True, seed_value)
    for quantity in QUANTITIES:
        want = original.get(quantity)
        if want is None:
            continue
        got = mutated.get(quantity) if mutated is not None else None
        relative = _difference(got, want)
        if relative > 0:
            return {"quantity": quantity, "relative": relative, "case": case.describe()}
    return None


def _results(subject: Subject, case: Case, swap: Swap, mutated: bool, seed_value: int) -> dict[str, Any] | None:
    """Each quantity of the target (original or mutated) on ``case``: a list of tensors, or an exception's
    name where computing it raised; None where even the outputs raised."""
    fn = subject.guard(subject.target.fn)
    found: dict[str, Any] = {}
    with swap.running(mutated), torch.enable_grad():
        try:
            args = subject.args(case)
            outputs = [o.detach() for o in outputs_of(fn(*args))]
            found["output"] = outputs
        except Exception as exc:
            return None if not mutated else {"output": type(exc).__name__}
        for quantity, compute in (("gradient", _vjp), ("tangent", _jvp), ("second order", _second)):
            try:
                found[quantity] = [t.detach() for t in compute(fn, subject.args(case), seed_value)]
            except Exception as exc:
                found[quantity] = type(exc).__name__
    return found


def _vjp(fn: Any, args: list[Any], seed_value: int) -> list[Any]:
    """The gradients for seeded cotangents; a backward that writes into a cotangent it was given (``grad.mul_``)
    changes what every other consumer of that gradient sees, and is told apart by the marker it returns."""
    inputs, outputs = grad_inputs(args), differentiable(outputs_of(fn(*args)))
    if not (inputs and outputs):
        return []
    cotangents = grad_outputs(outputs, seed_value)
    kept = [c.clone() for c in cotangents]
    found = vjp(outputs, inputs, cotangents)
    if any(not torch.equal(c, k) for c, k in zip(cotangents, kept)):
        found.append(torch.tensor(float("nan")))  # the original leaves its cotangents alone: a difference
    return found


def _jvp(fn: Any, args: list[Any], seed_value: int) -> list[Any]:
    if not grad_inputs(args):
        return []
    return tangents(fn, args, seed_value, torch.float64)


def _second(fn: Any, args: list[Any], seed_value: int) -> list[Any]:
    return second_order(fn, args, seed_value)


def _difference(got: Any, want: Any) -> float:
    """0 where ``got`` agrees with ``want`` (both raised alike, or every tensor within :data:`AGREE`); else the
    largest relative difference (infinite for a raise, a shape or a NaN pattern that differs)."""
    if isinstance(want, str):
        return 0.0  # the original cannot compute it: nothing to compare
    if isinstance(got, str) or got is None or len(got) != len(want):
        return math.inf
    worst = 0.0
    for g, w in zip(got, want):
        if g.shape != w.shape or g.dtype != w.dtype:
            return math.inf
        g, w = g.double() if not g.is_complex() else g, w.double() if not w.is_complex() else w
        if not torch.equal(torch.isnan(g), torch.isnan(w)):
            return math.inf
        finite = torch.isfinite(w) & torch.isfinite(g)
        if not torch.equal(g[~finite].nan_to_num(), w[~finite].nan_to_num()):
            return math.inf
        if finite.any():
            scale = float(w[finite].abs().max()) or 1.0
            gap = float((g[finite] - w[finite]).abs().max()) / scale
            if gap > AGREE:
                worst = max(worst, gap)
    return worst

"""A check's property, called by the audit exactly as its replay script calls it.

A check that declares ``replay`` (a function of :mod:`audit.kit`'s shape, ``property(fn, ref, args, **values) ->
list[str]``) runs it through :func:`problems`: ``fn`` is the target as every check calls it, ``ref`` the reference
(None when there is none, or when it draws its random numbers otherwise than the target), ``args`` the case's
arguments, and ``values`` :func:`values` of the cell and case, of which the property receives the names its
signature asks for. The replay script (:mod:`audit.engine.script`) writes the same values as literals, the same
function's source, and calls it once: the check and its script cannot disagree on what they compute.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import replace

import torch

from audit.checking import reference
from audit.core.contract import judged_by_own_error, wider_claimed
from audit.inputs.case import Case
from audit.kit.models import BatchError
from audit.kit.proxy import ProxyError
from audit.kit.tensors import floating, outputs_of
from audit.registry.model import EntryKind
from audit.core.violation import RegistryFault


def values(check, subject, case: Case) -> dict:
    """Every value a property may ask for on ``case``: the standard ones (below), then the check's own
    (``check.script_values``), a :class:`Case` among them standing for its argument list. Worked out once per case
    and check (each stage of a cell, and the failure's script, ask again; :func:`_worked_out`), a new dict each time.

    Standard: ``seed`` (the cell's: cotangents are drawn from it), ``tol`` (the float64-tight tolerance of the
    dtype, an :class:`audit.kit.tolerance.Tolerance`), ``dtype`` and ``device`` (the cell's, a torch dtype and a
    string),
    ``kind``, ``mutates`` and ``views`` (what the registry says of the entry), ``in_dims`` (the case's vmap
    batch positions, or None), ``batch_axes`` (argument -> the axis of the entry's batch dim), ``plan`` (the
    entry's training settings, a dict: a model's batch, steps, lr, micro_batches, batches), ``own_error`` (whether
    the cell compares with a reference by the reference's own error in the cell's dtype:
    :func:`audit.core.contract.judged_by_own_error`, unless the entry gives a ``tolerance`` for the dtype) and
    ``wider_dtype`` (the most precise claimed dtype above the cell's, a torch dtype, or None: the only wider dtype a
    property may run the target in), ``proxy_name`` (the entry's ``proxy``, "" without one) and ``modes`` (a module
    entry's ``proxy_modes``: the modes its proxy is checked in, else None), ``vjp_name`` (the entry's ``vjp``, ""
    without one), ``via_backward`` (whether its gradients are taken through .backward(): the target refuses
    torch.autograd.grad)."""
    memo = subject.state.get(_VALUES)
    if memo is None or memo[0] is not case or memo[1] != check.name:
        memo = subject.state[_VALUES] = (case, check.name, _worked_out(check, subject, case))
    return dict(memo[2])


#: Where :func:`values` keeps the last case's values in a cell's ``state`` (a cell's stages ask for one case in turn).
_VALUES = "replayable.values"


def _worked_out(check, subject, case: Case) -> dict:
    """:func:`values`, computed."""
    tight = subject.tolerance(tight=True)
    entry = subject.entry
    found = {"seed": subject.seed, "tol": tight,
             "dtype": getattr(torch, subject.dtype), "device": subject.device,
             "kind": EntryKind(entry.kind).value,
             "mutates": list(entry.mutates), "views": list(entry.views),
             "in_dims": list(case.in_dims) if case.in_dims else None, "batch_axes": batch_axes(entry),
             "plan": dataclasses.asdict(entry.training),
             "own_error": judged_by_own_error(entry.supports.dtypes, subject.dtype) and not _tolerance_given(subject),
             "wider_dtype": _torch_dtype(wider_claimed(entry.supports.dtypes, subject.dtype)),
             "proxy_name": entry.proxy or "", "vjp_name": entry.vjp or "", "via_backward": entry.backward_only,
             "modes": list(entry.proxy_modes) if entry.proxy and entry.kind == EntryKind.MODULE else None}
    return {**found, **(check.script_values(subject, case) if check.script_values else {})}


def _tolerance_given(subject) -> bool:
    """Whether the entry gives its own ``tolerance`` for the cell's dtype: then that fixed allowance is what the
    owner asked for, in place of the precision's own error."""
    return subject.dtype in dict(subject.entry.tolerance)


def _torch_dtype(name: str | None):
    """The torch dtype named ``name``, or None."""
    return getattr(torch, name) if name else None


def batch_axes(entry) -> dict:
    """Argument index -> the axis of the entry's batch dim in that argument's shape ({} without one)."""
    if not entry.batch:
        return {}
    return {i: spec.shape.index(entry.batch) for i, spec in entry.tensor_inputs if entry.batch in spec.shape}


#: What a property may also take by name, unguarded, as the script names them too: ``target`` (the callable itself:
#: a module's instance at the cell's dtype and device, a model's factory), ``reference`` (the entry's, or None) and,
#: for a module, ``make`` (its factory). A check that calls the target its own way (not reseeded, compiled,
#: exported, under torch.func, in other processes) takes them. ``proxy`` is the entry's proxy (or None), guarded as
#: ``ref`` is; ``declared_vjp`` the entry's declared VJP (or None), called as it is (a rule of values, drawing nothing).
UNGUARDED = ("target", "reference", "make", "proxy", "declared_vjp")


def unguarded(subject) -> dict:
    """:data:`UNGUARDED` on ``subject``: ``make`` only for a module."""
    found = {"target": subject.fn, "reference": subject.target.reference, "proxy": compared_proxy(subject),
             "declared_vjp": subject.target.vjp}
    factory = getattr(subject.target.fn, "factory", None)
    return {**found, "make": factory} if factory is not None else found


def compared_reference(subject, case: Case):
    """The reference as a property receives it: the entry's, guarded like the target, what it raises named as the
    reference's (:func:`audit.checking.reference.blamed`); None where there is none or where it draws otherwise than
    the target (``subject.reference_draws_alike``)."""
    if subject.target.reference is None or not subject.reference_draws_alike(case):
        return None

    def ref(*args):
        with reference.blamed():
            return subject.evaluate_reference(*args)

    return ref


def compared_proxy(subject):
    """The proxy as a property receives it: the entry's, guarded like the target; None without one."""
    if subject.target.proxy is None:
        return None

    def proxy(*args):
        return subject.evaluate_proxy(*args)

    return proxy


def observer(subject, case: Case, check: str, verdict: str = "not compared there"):
    """An ``observe`` for the kit's :func:`~audit.kit.compare.defined_only`: counts the example in the cell's
    ``metrics.reference_undefined`` (:func:`audit.checking.reference.note`)."""
    return lambda label, got, expected, masks: reference.note(subject, case, check, label, got, expected, masks,
                                                              verdict)


def accepted(prop, found: dict) -> dict:
    """The values ``prop``'s signature names (a ``**`` parameter takes them all)."""
    try:
        names = _named_once(prop)
    except TypeError:  # a callable that cannot be hashed (a local check's mutable dataclass): read every time
        names = _named(prop)
    if names is None:
        return dict(found)
    return {name: value for name, value in found.items() if name in names}


def _named(prop) -> frozenset[str] | None:
    """The parameter names of ``prop``'s signature; None where a ``**`` parameter takes any."""
    parameters = inspect.signature(prop).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return None
    return frozenset(parameters)


#: :func:`_named`, read once a property: inspect.signature costs more than the rest of a stage's bookkeeping.
_named_once = functools.lru_cache(maxsize=1024)(_named)


def problems(check, subject, case: Case, *, observe=None) -> list[str]:
    """What ``check.replay`` finds on ``case`` ([] when it holds), called as its replay script calls it, on the
    target, :func:`compared_reference` and fresh arguments; for a model, ``check.model_replay`` on the factory (no
    reference, no arguments). ``observe`` (see :func:`observer`) only watches: the script has none, and nothing it
    does changes what is found."""
    found = values(check, subject, case)
    found = {name: subject.args(v) if isinstance(v, Case) else [subject.args(c) for c in v]
             if isinstance(v, list) and v and all(isinstance(c, Case) for c in v) else v for name, v in found.items()}
    found.update(unguarded(subject))
    if observe is not None:
        found["observe"] = observe
    found["ratios"] = _ratios(subject)
    if subject.entry.kind == EntryKind.MODEL:
        try:
            return check.model_replay(subject.target.fn, None, None, **accepted(check.model_replay, found))
        except BatchError as exc:  # the factory's make_batch, not the code it trains: the cell is an error saying so
            raise RegistryFault(str(exc)) from exc
    alike(subject, case)
    try:
        return check.replay(target(subject), compared_reference(subject, case), subject.args(case),
                            **accepted(check.replay, found))
    except ProxyError as exc:  # the registry's proxy or VJP, not the target: the cell is an error naming it
        raise RegistryFault(str(exc)) from exc


def alike(subject, case: Case) -> None:
    """Once a cell, whether the entry's reference and proxy return what the target returns (as many tensors, of the
    same shapes) on ``case``: a :class:`RegistryFault` naming the one that does not (a reference that returns
    ``(y, x)`` for a target returning ``y`` would otherwise fail a correct backward). What either raises here is left
    to the properties, which name it."""
    if subject.state.get("alike") or not (subject.entry.reference or subject.entry.proxy):
        return
    subject.state["alike"] = True
    with torch.no_grad():
        try:
            mine = _structure(subject.evaluate(*subject.args(case)))
        except Exception:
            return  # the target's own failure: the properties report it
        for key, spec, evaluate in (("reference", subject.entry.reference, subject.evaluate_reference),
                                    ("proxy", subject.entry.proxy, subject.evaluate_proxy)):
            if spec is None or (key == "reference" and subject.target.reference is None):
                continue
            try:
                theirs = _structure(evaluate(*subject.args(case)))
            except Exception:
                continue
            if theirs != mine:
                raise RegistryFault(f"the entry's {key} {spec} returns {_said(theirs)} where the target returns "
                                    f"{_said(mine)}: a {key} computes what the target computes (fix the {key})")


def _structure(result) -> tuple:
    """The shapes of the floating tensors a call returned, in order (a non-tensor result: its type's name)."""
    found = [o for o in outputs_of(result) if floating(o)]
    return tuple(tuple(o.shape) for o in found) if found or isinstance(result, (torch.Tensor, tuple, list)) \
        else (type(result).__name__,)


def _said(structure: tuple) -> str:
    if structure and isinstance(structure[0], str):
        return structure[0]
    shapes = ", ".join(str(list(s)) for s in structure)
    return f"{len(structure)} tensor{'s' * (len(structure) != 1)} ({shapes})"


class _Ratios(dict):
    """What a property's ``ratios`` receives (its error over the reference's own, by output and gradient), kept in
    the cell's ``metrics.error_ratio`` as the largest over the cell's examples."""

    def __init__(self, metrics: dict):
        super().__init__()
        self.metrics = metrics

    def __setitem__(self, key: str, value: float) -> None:
        super().__setitem__(key, value)
        kept = self.metrics.setdefault("error_ratio", {})
        kept[key] = max(kept.get(key, 0.0), value)


def _ratios(subject) -> dict:
    """A ``ratios`` for a property (:class:`_Ratios`)."""
    return _Ratios(subject.metrics)


def target(subject):
    """The target as a property receives it: ``subject.evaluate``, with a module entry's module as ``.module``
    (:func:`audit.kit.autograd.module_of`), as the replay script's :func:`audit.kit.calls.guarded` target has it."""
    def fn(*args):
        return subject.evaluate(*args)

    fn.module = subject.fn if subject.entry.kind == EntryKind.MODULE else None
    return fn


def stage(check, prop, subject, case: Case, *, observe=None) -> list[str]:
    """:func:`problems` of ``prop``, one stage of the functions ``check.replay`` is composed of (same shape): for a
    ``run`` that excuses each stage's failure on its own terms."""
    return problems(replace(check, replay=prop), subject, case, observe=observe)


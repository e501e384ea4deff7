"""What a check is: a named property of one entry, run on drawn cases by the engine.

A repository's own checks (in its top-level ``checks/`` folder) use this same interface:
define ``CHECK = Check(...)`` in a module there and list its name in an entry's ``checks``.
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

from audit.core.contract import NUMERIC_PREFERENCE
from audit.registry.model import Entry
from audit.kit.refusal import NotApplicable
from audit.core.violation import Violation

__all__ = ["Check", "NotApplicable", "Violation"]  # a local check's imports: the interface re-exports the exceptions


def always(entry: Entry) -> bool:
    """Claimed or applicable for every entry."""
    return True


def numeric_dtypes(entry: Entry) -> tuple[str, ...]:
    """The one dtype numerical checks run in: float64 when claimed, else the widest claimed (complex128 before
    float32: its parts are float64, so a complex entry is judged at float64 precision)."""
    for dtype in NUMERIC_PREFERENCE:
        if dtype in entry.supports.dtypes:
            return (dtype,)
    return ("float64",)


def claimed_dtypes(entry: Entry) -> tuple[str, ...]:
    """Every dtype the entry claims."""
    return entry.supports.dtypes


def tolerance_values(subject, case) -> dict:
    """``script_values`` for a check that compares at the entry's tolerance (``subject.tolerance()``), in place of
    the float64-tight one the property's ``tol`` otherwise is."""
    return {"tol": subject.tolerance()}


#: The kinds a check runs on unless it says otherwise: everything called with drawn tensors.
OPERATOR_KINDS = ("function", "op", "callable", "module")


@dataclass(frozen=True)
class Check:
    """One column of the matrix.

    ``run(subject, case)`` raises :class:`Violation` when the property fails on ``case``; without one (the usual
    case) the declaration is judged (:func:`audit.checking.judgement.examine`): ``refusals`` (each
    ``(subject, case) -> reason``, "" to go on) make the case a skip before anything runs, then each of ``stages``
    (:class:`audit.checking.judgement.Stage`: a property, when it runs, the excuses of its finding) runs in turn; with
    no stages the property ``replay`` is held whole, and its first
    finding fails the case. A ``run`` is written only for work of the check's own once per cell (a compiled or
    exported program, rank processes) or stages that retry; it settles findings with
    :func:`audit.checking.judgement.settle`, by a finding's family, never by its wording.
    ``claimed(entry)`` says whether the property is claimed (or always required); an unclaimed
    property is still run and recorded as ``unsupported`` or ``xpass``. ``applies(entry)`` False
    means the check has nothing to say about the entry, and there is no cell. ``dtype_claimed``
    narrows the claim per dtype (for checks that also probe unclaimed dtypes). ``empty`` draws
    cases with a zero-sized dim; ``layouts`` draws a memory layout for every tensor input (``"mixed"``:
    contiguous too); ``batched`` draws a vmap batch position per tensor input; ``min_batch`` draws the
    entry's ``batch`` dim at least that large. ``replay`` is the property as one function of the replay kit's
    shape (:mod:`audit.kit`): ``property(fn, ref, args, **values) -> list[str]``, [] when it holds, plain torch
    and kit names only, so that a replay script carries its source and calls it as the check does
    (:mod:`audit.checking.replayable`), as :mod:`audit.checking.judgement` and a ``run`` do.
    ``model_replay`` is its twin for a ``model`` entry, and ``replay_helpers`` the check's own plain-torch
    functions they call. ``script_values(subject, case)`` gives the
    property's further keyword values (a name -> a value with a Python literal ``repr``, or a :class:`Case`, or a
    list of cases, given as argument lists), such as gradcheck's options. A check without ``replay`` (a local one
    may have none) gets a script that calls the target on the case and prints what it returns.
    ``kinds`` are the entry kinds it has cells for (models have their own training checks).
    ``not_for_sparse``: why the property cannot be checked when an input is sparse (``layout: sparse_coo`` or
    ``sparse_csr``); such a cell is a ``skip`` saying so. Empty: the check runs on sparse inputs too.
    ``special``: once the drawn cases hold, the cell also tries the structured cases of :mod:`audit.inputs.special`
    (zeros, all-equal values, domain bounds, identity, rotation, orthogonal matrices, repeated singular values and
    eigenvalues, equal arguments), where gradient bugs hide and random draws never land.
    ``examples`` caps the examples of a cell (0: ``--examples``), for a check whose every example is costly.
    ``needs_gradient``: the property is about gradients, so a target with no output that carries one (or no input
    that requires one) gives it nothing to compare: such a cell is a ``skip`` saying so, never a ``pass``. Whatever
    the check, a target that returned no tensor at all is a ``skip`` too (:func:`audit.engine.cell.nothing_compared`).
    ``resource``: the name of a per-worker resource the check needs (:mod:`audit.checking.resources`, such as the
    distributed check's ranks): the worker that holds the run's resources starts it once, and with several workers
    the check's cells all go to that one, so the others never start it.
    ``fixes``: (kind, fix) pairs, the likely fix of a failure of each declared kind (``Violation.kind`` with its
    numbers masked as :func:`audit.results.causes.mask` masks them: ``"gradient of input #"``), which reports show
    beside that cause's group; never worked out from a message.
    ``short``: its column heading in reports where space is short (its name when empty). ``repro_settings``: the
    run settings (fields of :class:`audit.runtime.options.RunOptions`, such as ``compile_backend``) that a replay of
    one of its cells must repeat: ``audit repro`` is given each one that is not its default.
    Bump ``version`` whenever the check's verdicts can change.
    """

    name: str
    contract: str
    run: Callable | None = None
    claimed: Callable[[Entry], bool] = always
    claim: str = ""
    applies: Callable[[Entry], bool] = always
    dtypes: Callable[[Entry], tuple[str, ...]] = numeric_dtypes
    dtype_claimed: Callable[[Entry, str], bool] | None = None
    empty: bool = False
    layouts: bool | str = False
    batched: bool = False
    min_batch: int = 0
    kinds: tuple[str, ...] = OPERATOR_KINDS
    replay: Callable | None = None
    model_replay: Callable | None = None
    replay_helpers: tuple[Callable, ...] = ()
    script_values: Callable | None = None
    not_for_sparse: str = ""
    version: int = 1
    examples: int = 0
    resource: str = ""
    needs_gradient: bool = False
    special: bool = False
    fixes: tuple[tuple[str, str], ...] = ()
    short: str = ""
    repro_settings: tuple[str, ...] = ()
    refusals: tuple[Callable, ...] = ()
    stages: tuple = ()


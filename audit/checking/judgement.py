"""Whether a check's findings fail a case: the one place where excuses are applied, in one documented order.

A check declares how it is judged (its ``refusals`` and ``stages``, :class:`audit.catalog.interface.Check`) and
:func:`judge` applies the declaration, the same way for every check:

1. **Refusals**, in declared order: the first that gives a reason makes the case a skip (:class:`NotApplicable`),
   before the target runs.
2. **Stages**, in declared order. A stage whose ``when`` says no (one for entries with a proxy, one for those
   without) is passed by; its own refusals come next; then its property runs as its replay script runs it
   (:func:`audit.checking.replayable.stage`). A stage that finds nothing hands on to the next.
3. **Excuses** of a stage's first finding, in this order whatever order they are declared in, each applying only to
   the finding families it names (:attr:`audit.kit.compare.Finding.family`), never to a wording:

   a. a known **torch bug** (:class:`KnownBug`): a skip naming PyTorch's bug (:class:`TorchBugHit`);
   b. an **unreliable reference** (:class:`UnreliableReference`: its own gradient is off finite differences here,
      :mod:`audit.checking.reference`): the case holds, noted in the cell's metrics;
   c. a **point without a derivative** (:class:`Kink`: a kink, a jump, an edge, :mod:`audit.checking.smoothness`):
      the case holds, noted in the cell's metrics;
   d. otherwise the finding fails the case (:class:`Violation`).

   An excused finding ends the case: it holds, and the stages after it are not run.

A stage that declares no excuse (a proxy's stage: the intended gradient is what was asked for) fails on its first
finding. A check with work of its own to do once per cell (compile, export, distributed) or stages that retry
(gradcheck, dtype) keeps a ``run``, and settles each stage's findings with :func:`settle`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from audit.checking import reference, replayable, smoothness
from audit.kit.autograd import grad_inputs
from audit.kit.precision import leaves_in
from audit.kit.refusal import NotApplicable
from audit.registry.model import EntryKind
from audit.toolkit.jacobian import gradcheck_options, wrap
from audit.toolkit.torch_bugs import TorchBug, TorchBugHit
from audit.core.violation import Violation


def always(subject) -> bool:
    """Every subject."""
    return True


def with_proxy(subject) -> bool:
    """An entry with a declared proxy (an intended gradient)."""
    return bool(subject.entry.proxy)


def without_proxy(subject) -> bool:
    """An entry without a proxy: its gradient is the forward's derivative."""
    return not subject.entry.proxy


def an_op(subject) -> bool:
    """A ``torch.library`` operator."""
    return subject.entry.kind == EntryKind.OP


def at_target(subject, case):
    """The target as a function of the case's inputs that require grad, and those inputs: what a :class:`Kink`
    probes by default."""
    args = subject.args(case)
    return wrap(subject, args), grad_inputs(args)


@dataclass(frozen=True)
class KnownBug:
    """A finding of one of ``families`` is PyTorch's ``bug`` (a skip saying so) for a subject ``when`` admits;
    ``context`` says what the check met (by default, the finding itself)."""

    bug: TorchBug
    families: tuple[str, ...]
    context: str = ""
    when: Callable = always

    def applies(self, subject, case, finding) -> bool:
        return family_of(finding) in self.families and bool(self.when(subject))

    def clear(self, subject, case, finding) -> bool:
        raise TorchBugHit(self.bug, self.context or str(finding))


@dataclass(frozen=True)
class Kink:
    """A finding (of ``families``; empty: any) is excused where ``at(subject, case)`` (a function and its inputs:
    :func:`at_target` by default) has no derivative at the case: along the coordinates that fail, or with
    ``anywhere`` along any (``values``: only a jump, a value that is not unique there, for a comparison of values).
    ``with_reference``: only when a reference was compared. ``label`` names the comparison in the cell's note
    (``{family}``: the finding's)."""

    label: str
    families: tuple[str, ...] = ()
    at: Callable = at_target
    anywhere: bool = False
    values: bool = False
    with_reference: bool = False

    def applies(self, subject, case, finding) -> bool:
        if self.families and family_of(finding) not in self.families:
            return False
        return not self.with_reference or replayable.compared_reference(subject, case) is not None

    def clear(self, subject, case, finding) -> bool:
        fn, inputs = self.at(subject, case)[:2]
        label = self.label.format(family=family_of(finding))
        if self.anywhere:
            return smoothness.excused_anywhere(subject, label, case, fn, inputs, values=self.values)
        return smoothness.excused(subject, label, case, fn, inputs, gradcheck_options(subject, inputs)["eps"])


def in_float64(subject, case):
    """The case's arguments in float64 (complex128 for complex ones): where a reference's own gradient is judged."""
    return leaves_in(subject.args(case), torch.float64)


@dataclass(frozen=True)
class UnreliableReference:
    """A finding against the reference is excused where the reference's own gradient disagrees with finite
    differences at ``at(subject, case)`` (arguments: :func:`in_float64` by default), a kink or a singular point of
    the reference: there is no true gradient to judge by. ``label`` names the comparison in the cell's note."""

    label: str
    at: Callable = in_float64

    def applies(self, subject, case, finding) -> bool:
        return True

    def clear(self, subject, case, finding) -> bool:
        return reference.unreliable(subject, case, self.label, self.at(subject, case))


#: The order excuses are tried in, whatever order a declaration gives them.
ORDER = (KnownBug, UnreliableReference, Kink)


@dataclass(frozen=True)
class Stage:
    """One step of a check's property: ``prop`` (of the replay kit's shape; None: the check's ``replay``), run for
    a subject ``when`` admits, after its ``refusals`` (``(subject, case) -> reason``, "" to go on), its first
    finding judged by ``excuses``; ``observe(subject, case)`` gives the property's ``observe`` (None: none)."""

    prop: Callable | None = None
    excuses: tuple = ()
    when: Callable = always
    refusals: tuple[Callable, ...] = ()
    observe: Callable | None = None


def family_of(finding) -> str:
    """A finding's family (:class:`audit.kit.compare.Finding`); "" for a plain message."""
    return getattr(finding, "family", "")


def refuse(refusals, subject, case) -> None:
    """A :class:`NotApplicable` with the reason of the first of ``refusals`` that gives one."""
    for refusal in refusals:
        reason = refusal(subject, case)
        if reason:
            raise NotApplicable(reason)


def settle(subject, case, found: list, excuses=()) -> bool:
    """The verdict on one stage's findings: False when there are none, True when an excuse clears the first (in
    :data:`ORDER`: the case holds, nothing after it is asked), a skip when it is a known torch bug, else a
    :class:`Violation` with it."""
    if not found:
        return False
    for excuse in sorted(excuses, key=lambda e: ORDER.index(type(e))):
        if excuse.applies(subject, case, found[0]) and excuse.clear(subject, case, found[0]):
            return True
    raise Violation(found[0])


def examine(check, subject, case) -> None:
    """Raise :class:`Violation` when ``check``'s property fails on ``case`` (:class:`NotApplicable` where it cannot
    be judged): its ``run``, or without one its declaration judged (:func:`judge`)."""
    if check.run is not None:
        check.run(subject, case)
        return
    judge(check, subject, case)


def judge(check, subject, case) -> None:
    """Hold ``check``'s declaration on ``case`` (the order above): its refusals, then each stage, each stage's
    first finding settled by its excuses. A check that declares no stage has one: its ``replay`` held as it is."""
    refuse(check.refusals, subject, case)
    for stage in check.stages or (Stage(),):
        if not stage.when(subject):
            continue
        refuse(stage.refusals, subject, case)
        observe = stage.observe(subject, case) if stage.observe is not None else None
        found = replayable.stage(check, stage.prop or check.replay, subject, case, observe=observe)
        if settle(subject, case, found, stage.excuses):
            return

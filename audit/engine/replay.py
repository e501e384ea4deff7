"""Replay one stored case of a cell in this process: what ``audit repro`` runs, exactly as the cell ran it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.checking import judgement
from audit.catalog.interface import Violation
from audit.kit.refusal import NotApplicable
from audit.core.errors import first_line, refuses_grad
from audit.kit.explain import user_site

if TYPE_CHECKING:
    from audit.catalog.interface import Check
    from audit.inputs.case import Case
    from audit.runtime.subject import Subject


def replay_case(check: Check, subject: Subject, case: Case) -> str:
    """The failure ``check`` shows on ``case`` (its message, or the exception the target raised), or ``""``
    when the property holds there. The global generators are seeded as the cell seeded them, so a target
    that draws from them draws what it drew in the audit."""
    from audit.engine.cell import seed_global_generators
    from audit.runtime.isolation import isolated

    with isolated():  # global torch state the target changes is put back, as run_cell puts it back
        seed_global_generators(subject.seed)
        return _failure(check, subject, case)


def _failure(check: Check, subject: Subject, case: Case) -> str:
    try:
        judgement.examine(check, subject, case)
    except NotApplicable:
        return ""  # the check does not apply to this case: nothing fails
    except Exception as exc:
        if refuses_grad(exc) and not subject.entry.backward_only:  # as the cell did: again through .backward()
            return _failure(check, _through_backward(subject), case)
        if isinstance(exc, Violation):
            return str(exc)
        # as the search counts it: the target raised on a case inside its domain
        return f"raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}"
    return ""


def _through_backward(subject: Subject) -> Subject:
    """``subject`` with its gradients taken through torch.autograd.backward (``backward_only``), fresh state."""
    from dataclasses import replace

    from audit.runtime.target import through_backward

    return replace(subject, entry=replace(subject.entry, backward_only=True),
                   target=replace(subject.target, fn=through_backward(subject.target.fn)), state={}, metrics={})

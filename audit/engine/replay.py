"""Replay one stored case of a cell in this process: what ``audit repro`` runs, exactly as the cell ran it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from audit.checks.interface import NotApplicable, Violation
from audit.errors import first_line
from audit.frames import user_site

if TYPE_CHECKING:
    from audit.checks.interface import Check
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
        check.run(subject, case)
    except NotApplicable:
        return ""  # the check does not apply to this case: nothing fails
    except Violation as exc:
        return str(exc)
    except Exception as exc:  # as the search counts it: the target raised on a case inside its domain
        return f"raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}"
    return ""

"""Run one check's property over Hypothesis-drawn cases and shrink any failure to a minimal case."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass

from hypothesis import HealthCheck, Phase, Verbosity, given, seed, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import Flaky

from audit.checks.interface import NotApplicable, Violation
from audit.errors import first_line as _first_line
from audit.frames import user_site
from audit.inputs.case import Case


def _private_storage() -> None:
    """Hypothesis keeps a cache (``.hypothesis/``) in the working directory; a run writes nothing outside
    ``--out`` and the cache folder, so Hypothesis gets a temporary home, made by the first process that
    imports this module and removed when it exits; the workers it starts inherit it through the
    environment (unless the user chose one with ``HYPOTHESIS_STORAGE_DIRECTORY``)."""
    if not os.environ.get("HYPOTHESIS_STORAGE_DIRECTORY"):
        home = tempfile.mkdtemp(prefix="autograd-audit-hypothesis-")
        atexit.register(shutil.rmtree, home, ignore_errors=True)
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = home
    set_hypothesis_home_dir(os.environ["HYPOTHESIS_STORAGE_DIRECTORY"])


_private_storage()


@dataclass(frozen=True)
class Exploration:
    """How the property fared: held on ``examples`` cases, or failed on the shrunk ``case``."""

    held: bool
    examples: int
    seconds: float
    case: Case | None = None
    message: str = ""
    skipped: str = ""


def explore(prop, strategy, *, examples: int, seed_value: int, shrink: bool = True) -> Exploration:
    """``prop(case)`` on up to ``examples`` drawn cases; raises only for the audit's own errors."""
    state = {"calls": 0, "first_failure": None, "failures": [], "skipped": ""}
    start = time.perf_counter()
    test = _given(_property(prop, state), strategy, examples, seed_value, shrink)
    try:
        test()
    except (Violation, Flaky, MemoryError) as exc:
        if state.get("out_of_memory"):
            raise MemoryError(state["out_of_memory"]) from None
        if not state["failures"]:
            raise
        flaky = isinstance(exc, Flaky)
        case, message = state["failures"][0 if flaky else -1]
        if flaky:
            message += " (it did not fail again on the same case: the target is not deterministic)"
        return Exploration(False, state["first_failure"] or state["calls"], _since(start), case, message)
    return Exploration(True, state["calls"], _since(start), skipped=state["skipped"])


def _property(prop, state: dict):
    def run(case: Case) -> None:
        if state["skipped"]:
            return
        if state.get("out_of_memory"):
            raise MemoryError(state["out_of_memory"])  # no shrinking through repeated blow-ups
        state["calls"] += 1
        try:
            prop(case)
        except NotApplicable as exc:
            state["skipped"] = str(exc)
        except Violation as exc:
            if _record(state, case, str(exc)):
                raise
        except MemoryError as exc:
            state["out_of_memory"] = str(exc) or "MemoryError"
            raise
        except RuntimeError as exc:
            if "can't allocate memory" in str(exc):
                state["out_of_memory"] = _first_line(exc)
                raise MemoryError(state["out_of_memory"]) from exc
            message = f"raised {type(exc).__name__}: {_first_line(exc)}{user_site(exc)}"
            if _record(state, case, message):
                raise Violation(message) from exc
        except Exception as exc:  # the target raised: on a case inside its domain, that is a bug
            message = f"raised {type(exc).__name__}: {_first_line(exc)}{user_site(exc)}"
            if _record(state, case, message):
                raise Violation(message) from exc
    return run


def _record(state: dict, case: Case, message: str) -> bool:
    """Keep a failure of the first failure's kind, and say whether it counts. A failure of another kind
    met while shrinking is no simpler version of the first (it is another bug, or the first one's shadow
    at a special point, such as 0): it counts as a pass, so the shrink stays on the first kind."""
    kind = failure_kind(message)
    if state["failures"] and kind != state["kind"]:
        return False
    state["kind"] = kind
    state["failures"].append((case, message))
    if state["first_failure"] is None:
        state["first_failure"] = state["calls"]
    return True


def failure_kind(message: str) -> str:
    """What a failure is, without where and by how much: its message with numbers masked, cut short."""
    return re.sub(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?", "#", message)[:KIND_LENGTH]


#: Enough of a message to tell "output 0 of sample 0" from "gradient of input 0", and one raised
#: exception type from another, before the values start.
KIND_LENGTH = 40


def _given(run, strategy, examples: int, seed_value: int, shrink: bool):
    phases = [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    configured = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                          phases=phases, suppress_health_check=list(HealthCheck), print_blob=False,
                          verbosity=Verbosity.quiet, report_multiple_bugs=False)
    return seed(seed_value)(configured(given(strategy)(run)))


def _since(start: float) -> float:
    return time.perf_counter() - start

"""Run one check's property over Hypothesis-drawn cases and shrink any failure to a minimal case."""

from __future__ import annotations

import atexit
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from hypothesis import HealthCheck, Phase, Verbosity, example, given, seed, settings
from hypothesis.configuration import set_hypothesis_home_dir
from hypothesis.errors import Flaky
from hypothesis.strategies import SearchStrategy

from audit.catalog.interface import Violation
from audit.kit.refusal import NotApplicable
from audit.core.violation import RegistryFault
from audit.core.errors import first_line as _first_line
from audit.core.errors import refuses_grad
from audit.kit.explain import user_site
from audit.inputs.case import Case
from audit.runtime import health, triton


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


def _no_local_constants() -> None:
    """Hypothesis sometimes draws a number literal found in any "local" module already imported (not in
    site-packages): which modules a worker had loaded before a cell (other entries' targets, sharding, an
    editable install of the audit) would change the cell's cases, and a seed would no longer fix them. The
    pool of local constants is kept empty (Hypothesis's global constants, 0, 1, infinities..., still are
    drawn). A private hook: where a Hypothesis release lacks it, there is nothing to pin."""
    try:
        from hypothesis.internal.conjecture import providers
        from hypothesis.internal.constants_ast import Constants
        from hypothesis.internal.floats import float_to_int
        from sortedcontainers import SortedSet

        empty = Constants(integers=SortedSet(), floats=SortedSet(key=float_to_int), bytes=SortedSet(),
                          strings=SortedSet())
    except (ImportError, TypeError):
        return
    if hasattr(providers, "_get_local_constants"):
        providers._get_local_constants = lambda: empty
        cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)
        if cache is not None:  # pools computed before this, with local constants in them
            cache.clear()


_no_local_constants()


@dataclass(frozen=True)
class Counterexample:
    """One distinct failure: the shrunk case it showed on, what it said, and its kind (``Violation.kind``)."""

    case: Case
    message: str
    kind: str = ""


@dataclass(frozen=True)
class Exploration:
    """How the property fared: held on ``examples`` drawn cases (and ``special`` structured ones), or failed on the
    shrunk ``case``; ``others``
    are failures of other kinds, each found and shrunk by a search of its own."""

    held: bool
    examples: int
    seconds: float
    case: Case | None = None
    message: str = ""
    skipped: str = ""
    others: tuple[Counterexample, ...] = ()
    special: int = 0
    kind: str = ""
    fault: str = ""
    refused: str = ""

    def failures(self) -> tuple[Counterexample, ...]:
        """Every failure found, the first (``case``, ``message``, ``kind``) first, then the ``others``; none when
        the property held."""
        first = () if self.held or self.case is None else (Counterexample(self.case, self.message, self.kind),)
        return first + self.others


#: Distinct failures one cell reports at most. Each past the first costs a search of its own (every
#: example drawn again, then a shrink), and one more search to learn there is no further one: three tell
#: one bug from several without letting a badly broken target multiply a cell's time.
MAX_FAILURES = 3
#: Further searches end once the cell has spent 1/BUDGET_PARTS of its time budget (half): the failures found
#: by then stand, so a failure already found is never lost to the cell's timeout. An int on purpose:
#: Hypothesis also draws the literals of local modules, and a new float literal here would change the draws.
BUDGET_PARTS = 2


@dataclass
class SearchState:
    """What one search has seen so far; the property updates it on every call Hypothesis makes. ``known``: the
    failure kinds that count as passes (earlier searches reported them); ``failures``: (case, message) of the
    first failure's kind (``kind``, a ``Violation.kind``), most shrunk last; ``first_failure``: the call that
    failed first."""

    known: frozenset[str]
    deadline: float
    calls: int = 0
    first_failure: int | None = None
    failures: list[tuple[Case, str]] = field(default_factory=list)
    kind: str = ""
    skipped: str = ""
    out_of_memory: str = ""
    out_of_time: bool = False
    damaged: str = ""
    fault: str = ""
    refused: str = ""

    @property
    def stopped(self) -> bool:
        """Whether the search has stopped calling the property: a skip, a registry fault or a refused .grad()."""
        return bool(self.skipped or self.fault or self.refused)


class Damaged(BaseException):
    """The target left this process possibly damaged (see :mod:`audit.runtime.health`): the search ends at once,
    without shrinking or searching further in a process that may no longer behave. A ``BaseException``, so
    that Hypothesis passes it through rather than replaying the example."""


#: A check's property on one case: it returns when it holds, raises :class:`Violation` when it does not.
Property = Callable[[Case], object]


def explore(prop: Property, strategy: SearchStrategy[Case], *, examples: int, seed_value: int, shrink: bool = True,
            budget: float = 0.0, limit: int = MAX_FAILURES, special: tuple[Case, ...] = ()) -> Exploration:
    """``prop(case)`` on up to ``examples`` drawn cases; raises only for the audit's own errors. With a
    ``budget`` (the cell's seconds) and ``shrink``, a failing property is searched again, with the same
    seed, for failures of other kinds, up to ``limit`` failures in all (see :data:`MAX_FAILURES`); a property
    that holds is searched once. Once the drawn cases hold, the ``special`` cases are tried, as they are
    (see :mod:`audit.inputs.special`): a failure found by the draws keeps its shrunk case."""
    start = time.perf_counter()
    found = _search(prop, strategy, examples, seed_value, shrink)
    if found.held and special:
        found = _special(prop, strategy, seed_value, special, found)
        return replace(found, seconds=_since(start))
    if found.held or not (shrink and budget) or limit <= 1:
        return replace(found, seconds=_since(start))
    deadline = start + budget / BUDGET_PARTS
    others = _others(prop, strategy, examples, seed_value, found.kind, deadline, limit)
    return replace(found, seconds=_since(start), others=others)


def _special(prop: Property, strategy: SearchStrategy[Case], seed_value: int, special: tuple[Case, ...],
             drawn: Exploration) -> Exploration:
    """The ``special`` cases, once the ``drawn`` ones held: Hypothesis's explicit examples, never shrunk."""
    state = SearchState(frozenset(), math.inf)
    found = _ran(given_cases(_property(prop, state), strategy, 1, seed_value, False, special), state)
    # ``examples`` counts drawn cases only, as ``--examples`` sets them; ``special`` counts the structured ones run
    return replace(found, examples=drawn.examples, special=found.examples, skipped=drawn.skipped or found.skipped,
                   fault=drawn.fault or found.fault, refused=drawn.refused or found.refused)


def _others(prop: Property, strategy: SearchStrategy[Case], examples: int, seed_value: int, kind: str,
            deadline: float, limit: int = MAX_FAILURES) -> tuple[Counterexample, ...]:
    """Failures of kinds other than ``kind``, one search each, every kind found counted as a pass in the
    searches after it; stops at the first search that finds none, runs out of memory or of time."""
    others: list[Counterexample] = []
    known = {kind}
    while len(others) + 1 < limit and time.perf_counter() < deadline:
        try:
            found = _search(prop, strategy, examples, seed_value, True, frozenset(known), deadline)
        except MemoryError:
            break
        if found.held or found.case is None:  # a failure always has its case
            break
        others.append(Counterexample(found.case, found.message, found.kind))
        known.add(found.kind)
    return tuple(others)


def _search(prop: Property, strategy: SearchStrategy[Case], examples: int, seed_value: int, shrink: bool,
            known: frozenset[str] = frozenset(), deadline: float = math.inf) -> Exploration:
    """One Hypothesis search in which failures of the ``known`` kinds count as passes."""
    state = SearchState(known, deadline)
    return _ran(given_cases(_property(prop, state), strategy, examples, seed_value, shrink), state)


def _ran(test: Callable[[], None], state: SearchState) -> Exploration:
    """What running ``test`` (a search, or the special cases) found."""
    try:
        test()
    except (Violation, Flaky, MemoryError, _OutOfTime) as exc:
        return _failure(state, exc)
    return Exploration(True, state.calls, 0.0, skipped=state.skipped, fault=state.fault, refused=state.refused)


def _failure(state: SearchState, exc: Exception) -> Exploration:
    """What a search that ended on ``exc`` found: its last (most shrunk) failure, or its first when that did
    not fail again (Hypothesis says Flaky). Past the deadline the replay fails on time, not on the case:
    no sign of a flaky target. A search out of time before any failure found none."""
    if state.out_of_memory:
        raise MemoryError(state.out_of_memory) from None
    if not state.failures:
        if isinstance(exc, _OutOfTime):
            return Exploration(True, state.calls, 0.0)
        raise exc
    flaky = isinstance(exc, Flaky) and not state.out_of_time
    case, message = state.failures[0 if flaky else -1]
    if flaky:
        message += FLAKY
    return Exploration(False, state.first_failure or state.calls, 0.0, case, message, kind=state.kind)


#: Said of a failure that did not fail again: what it says is the target's fault, not the failure's kind.
FLAKY = " (it did not fail again on the same case: the target is not deterministic)"


class _OutOfTime(Exception):
    """A further search ran past its deadline: it ends, keeping the smallest failure it had found."""


def _property(prop: Property, state: SearchState) -> Callable[[Case], None]:
    def run(case: Case) -> None:
        if state.stopped:
            return
        _stop_when_spent(state, case)
        state.calls += 1
        try:
            prop(case)
            _no_strays(state, case)
        except NotApplicable as exc:
            state.skipped = str(exc)
        except RegistryFault as exc:
            state.fault = f"{exc} on {case.describe()}" if case.args else str(exc)  # a model's case has no arguments
        except Violation as exc:
            if refuses_grad(exc):
                state.refused = _first_line(exc)
                return
            reason = health.damage(exc)  # a check's own words for what the target raised: the cause may be damage
            if reason:
                _damaged(state, case, exc, reason)
            if _record(state, case, str(exc), exc.kind):
                raise
        except MemoryError as exc:
            health.note(health.damage(exc))
            state.out_of_memory = str(exc) or "MemoryError"
            raise
        except RuntimeError as exc:
            if "can't allocate memory" in str(exc):
                health.note(health.damage(exc))
                state.out_of_memory = _first_line(exc)
                raise MemoryError(state.out_of_memory) from exc
            _raised(state, case, exc)
        except Exception as exc:  # the target raised: on a case inside its domain, that is a bug
            _raised(state, case, exc)
        except BaseException as exc:  # KeyboardInterrupt, SystemExit, GeneratorExit: never a pass, never shrunk
            _damaged(state, case, exc, health.damage(exc))
        finally:
            health.stray_fork_guard()  # a forked copy of this process, back from the target: it ends here
    return run


def _no_strays(state: SearchState, case: Case) -> None:
    """A forked copy of this process that came back from the target ends the search (see
    :mod:`audit.runtime.health`)."""
    strays = health.forked_strays()
    if strays:
        health.note("the target forked a copy of the process that returned into the audit")
        state.damaged = f"{health.describe_strays(strays)}; seen by example {case.describe()}"
        raise Damaged(state.damaged)


def _raised(state: SearchState, case: Case, exc: Exception) -> None:
    """The target raised ``exc`` on ``case``: a failure of its own, damage to this process, or a limitation of
    Triton's interpreter running its kernels (a skip saying so)."""
    reason = health.damage(exc)
    if reason:
        _damaged(state, case, exc, reason)
    if refuses_grad(exc):  # the cell is run again with its gradients taken through .backward()
        state.refused = _first_line(exc)
        return
    limit = triton.limitation(exc)
    if limit:
        state.skipped = limit
        return
    site = user_site(exc)
    message = f"raised {type(exc).__name__}: {_first_line(exc)}{site}"
    if _record(state, case, message, f"raised {type(exc).__name__}{site}"):
        raise Violation(message) from exc


def _damaged(state: SearchState, case: Case, exc: BaseException, reason: str) -> None:
    """End the search on damage: what was raised, where, on which example."""
    health.note(reason)
    if isinstance(exc, SystemExit):
        said = f"the target called sys.exit({exc.code!r})"
    elif isinstance(exc, Violation):
        said = f"{exc} ({reason})"
    else:
        said = f"the target raised {type(exc).__name__}" + (f": {_first_line(exc)}" if str(exc) else "")
    state.damaged = f"{said}{user_site(exc)} on example {case.describe()}"
    raise Damaged(state.damaged) from exc


def _stop_when_spent(state: SearchState, case: Case) -> None:
    """Fail every call at once, without running the property, once memory or the deadline ran out: no
    shrinking through repeated blow-ups, and a search out of time ends on the failure it had."""
    if state.out_of_memory:
        raise MemoryError(state.out_of_memory)
    if state.damaged:
        raise Damaged(state.damaged)
    if health.forked_strays():
        _no_strays(state, case)
    if state.out_of_time or time.perf_counter() > state.deadline:
        state.out_of_time = True
        raise _OutOfTime()


def _record(state: SearchState, case: Case, message: str, kind: str) -> bool:
    """Keep a failure of the first failure's kind, and say whether it counts. A failure of another kind
    met while shrinking is no simpler version of the first (it is another bug, or the first one's shadow
    at a special point, such as 0): it counts as a pass, so the shrink stays on the first kind. A failure
    of a kind an earlier search found (``known``) counts as a pass too: that search reported it."""
    if kind in state.known or (state.failures and kind != state.kind):
        return False
    state.kind = kind
    state.failures.append((case, message))
    if state.first_failure is None:
        state.first_failure = state.calls
    return True


def given_cases(run: Callable[[Case], None], strategy: SearchStrategy[Case], examples: int, seed_value: int,
                shrink: bool, special: tuple[Case, ...] = ()) -> Callable[[], None]:
    """``run`` on ``examples`` cases of ``strategy`` (after the ``special`` ones), seeded, quiet, without a
    database: the one Hypothesis configuration of the engine's searches and of the mutants' probe."""
    phases = [Phase.explicit] if special else [Phase.explicit, Phase.generate] + ([Phase.shrink] if shrink else [])
    configured = settings(max_examples=examples, deadline=None, database=None, derandomize=False,
                          phases=phases, suppress_health_check=list(HealthCheck), print_blob=False,
                          verbosity=Verbosity.quiet, report_multiple_bugs=False)
    test = given(strategy)(run)
    for case in reversed(special):  # as if written @example(first) ... @example(last): run in the given order
        test = example(case)(test)
    test = seed(seed_value)(configured(test))
    # No database, so no key: without one Hypothesis hashes the test's source (tokenized) at every search. A
    # private attribute, which Hypothesis's own ``find`` sets to None the same way; a release without it hashes.
    test._hypothesis_internal_database_key = None  # type: ignore[attr-defined]
    return test


def _since(start: float) -> float:
    return time.perf_counter() - start

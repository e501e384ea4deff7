"""Failing cells grouped by root cause, whatever checks it broke.

A root cause is what the failures share, in this order:

1. an entry-level failure (the target could not be loaded, imported or built): its root message (the innermost
   ``Error: ...`` of the chain, numbers and the entry's own names masked), so every cell of the entry, and of every
   entry of a package that fails the same way, is one cause;
2. an exception with a raising site (``raised TypeError: ... (at pkg/ops.py:41 in f)``, however the check that met
   it words what it was doing): its type and site;
3. otherwise the check and the finding's declared kind, refined by the message once numbers, shapes and the entry's
   own name are masked: eleven cells that say ``max |analytic - numeric| = 0.5`` and ``= 3`` of the same gradient
   are one cause.

A cause lists the checks, dtypes and entries it touched, and is shown in the tier of its most severe cell (a claimed
failure, an error, an unclaimed probe). The kind is read from the cell (``Cell.kind``), never worked out from its
message; a cell from an older matrix, without one, is grouped by its message alone.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from audit.core.contract import Status
from audit.results.cells import Cell
from audit.results.kinds import ErrorKind
from audit.results.matrix import Matrix, MatrixEntry

#: A failure's likely fix, by (check, masked kind): declared by each check, and by the engine for its errors
#: (under the check "": any check).
Fixes = Mapping[tuple[str, str], str]

#: A number as messages write it (not the digits of a name: float64, in[0]'s 0 is masked, float64's 64 is not).
_NUMBER = re.compile(r"(?<![\w.])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.]*\w)|\b(?:nan|inf|NaN)\b")
#: A shape or index once its numbers are masked: [#, #, #] and (#, #) read as one.
_SHAPE = re.compile(r"\[#(?:, #)*\]")
_TUPLE = re.compile(r"\(#(?:, #)*,?\)")
#: A ``module:Qualname`` (a proxy, a reference, a target) as messages name it: a name, masked.
_SPEC = re.compile(r"(?<![\w/])[A-Za-z_][\w.]*:[A-Za-z_][\w.]*(?![\w(])")
#: How the engine appends where a failure showed (:func:`audit.engine.cell._failure`): the case, not the cause.
WHERE = "; on "
#: A raising site's line, kept: two raises at different lines are different causes.
_SITE = re.compile(r"(\.\w+:)(\d+)")
#: The case's dims, as :meth:`audit.inputs.case.Case.describe` writes them: ``with B=#, N=#``.
_DIMS = re.compile(r"\bwith \w+=#(?:, \w+=#)*")
#: An exception and where it was raised, as every check quotes it: ``raised TypeError: ... (at file:line in f)``.
_RAISE = re.compile(r"raised (?P<type>[\w.]+)(?::.*?)? \(at (?P<site>[^()]+:\d+(?: in [\w<>.]+)?)\)")
#: The innermost error of a load failure's chain: ``...: ModuleNotFoundError: No module named 'pkg'``.
_ROOT = re.compile(r"(?:^|: )(?P<root>[A-Z]\w*(?:Error|Exception|Exit)\b: .*)$")


#: What a cause's line keeps of its messages' shared text.
TITLE = 100


class Tier(enum.IntEnum):
    """Where a cause's group comes in a report: claimed failures, then errors, then what does not gate."""

    FAILURE = 0
    ERROR = 1
    PROBE = 2


TIER_TITLES = {Tier.FAILURE: "failures of claimed cells", Tier.ERROR: "errors (the audit could not decide)",
               Tier.PROBE: "unclaimed probes (do not gate)"}


@dataclass(frozen=True)
class Member:
    """One failing cell of a cause, with its entry."""

    entry: MatrixEntry
    cell: Cell

    @property
    def size(self) -> int:
        """How many input elements its shrunk case has (a cell without a case counts as large)."""
        args = (self.cell.case or {}).get("args")
        if not isinstance(args, list):
            return 1 << 62
        return sum(math.prod(a.get("shape") or [1]) for a in args if isinstance(a, dict))


@dataclass(frozen=True)
class Cause:
    """One cause and the cells it fails, in matrix order."""

    check: str
    kind: str
    pattern: str
    tier: Tier
    members: tuple[Member, ...]
    fix: str = ""

    @property
    def title(self) -> str:
        """The cause in one line (:func:`title`); a raise met by several checks names them."""
        return title(self.check or ", ".join(self.checks), self.kind, self.pattern)

    @property
    def checks(self) -> tuple[str, ...]:
        """The checks whose cells it fails, each once, in matrix order."""
        return tuple(dict.fromkeys(m.cell.check for m in self.members))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes of its cells, each once, in matrix order."""
        return tuple(dict.fromkeys(m.cell.dtype for m in self.members))

    @property
    def entries(self) -> tuple[str, ...]:
        """The names of the entries it fails, each once, in matrix order."""
        return tuple(dict.fromkeys(m.entry.name for m in self.members))

    @property
    def owners(self) -> tuple[str, ...]:
        """Everyone who owns one of its entries, sorted."""
        return tuple(sorted({o for m in self.members for o in m.entry.owners or ("(no owner)",)}))

    @property
    def smallest(self) -> Member:
        """The member whose shrunk case is smallest (the first of those): its replay is the one to run."""
        return min(self.members, key=lambda m: m.size)


def mask(text: str, names: Iterable[str] = ()) -> str:
    """``text`` with numbers, shapes, the case's dims and ``names`` masked; a raising site's line kept."""
    for name in sorted(filter(None, names), key=len, reverse=True):  # whole words only: "a" is not in "analytic"
        text = re.sub(rf"(?<![\w.]){re.escape(name)}(?!\w)", "<name>", text)
    pieces = _SITE.split(text)  # text, then per site its file's end and its line: the lines are kept
    kept = [piece if i % 3 == 2 else _masked(piece) for i, piece in enumerate(pieces)]
    return _DIMS.sub("with dims", "".join(kept))


def _masked(text: str) -> str:
    return _TUPLE.sub("(#)", _SHAPE.sub("[#]", _NUMBER.sub("#", _SPEC.sub("<name>", text))))


def title(check: str, kind: str, pattern: str) -> str:
    """A cause in one line: the check, the kind, what its messages share (cut at TITLE characters):
    ``gradcheck: gradient of input # — max |analytic - numeric| = # at ...``."""
    said = _after_shared(kind, pattern) if kind else pattern
    said = said if len(said) <= TITLE else said[:TITLE - 1].rstrip() + "…"
    return f"{check}: " + " — ".join(filter(None, (kind, said)))


def _after_shared(kind: str, pattern: str) -> str:
    """``pattern`` without the words it begins with in common with ``kind`` (said once, in the kind)."""
    shared = next((i for i, (a, b) in enumerate(zip(kind, pattern)) if a != b), min(len(kind), len(pattern)))
    if shared < len(pattern) and pattern[shared].isalnum():
        shared = pattern.rfind(" ", 0, shared) + 1  # a whole word only
    return pattern[shared:].lstrip(" :;,—")


def identity(check: str, kind: str, message: str, names: Iterable[str]) -> tuple[str, str, str]:
    """What makes two failures one root cause (see the module's docstring): (check, masked kind, masked pattern),
    the check "" for a cause that is not any one check's."""
    names = tuple(names)
    if kind == ErrorKind.NOT_LOADED.value:
        root = _ROOT.search(message)
        return "", kind, mask(root.group("root") if root else message, names)
    raised = _RAISE.search(kind) or _RAISE.search(message)  # the declared kind first, as everywhere here
    if raised:
        return "", f"{RAISED}{raised.group('type')} (at {raised.group('site')})", mask(_raised_text(message), names)
    if kind in _ENGINE_KINDS:
        return "", mask(kind, names), mask(message, names)
    return check, mask(kind, names), mask(message, names)


def _raised_text(message: str) -> str:
    """What an exception said, from the message that quotes it (what the check was doing before it dropped)."""
    found = re.search(r"raised [\w.]+: (.*?)(?: \(at [^()]+:\d+(?: in [\w<>.]+)?\))", message)
    return found.group(1) if found else message


def tier(cell: Cell) -> Tier:
    """A failing cell's tier: a claimed failure, an error, or a probe that does not gate."""
    if not cell.gates(strict=False):
        return Tier.PROBE
    return Tier.FAILURE if cell.status is Status.FAIL else Tier.ERROR


def causes(matrix: Matrix, fixes: Fixes | None = None, *, owner: str | None = None,
           statuses: tuple[Status, ...] = (Status.FAIL, Status.ERROR)) -> tuple[Cause, ...]:
    """The root causes of every cell with one of ``statuses``: by the tier of their most severe cell, ``owner``'s
    before everyone else's, then the most entries first, then the most cells, then the order of their first
    cell."""
    found: dict[tuple[str, str, str], list[Member]] = {}
    for entry, cell in matrix.pairs():
        if cell.status in statuses:
            found.setdefault(_key(entry, cell), []).append(Member(entry, cell))
    fixes = fixes or {}
    made = [Cause(check, kind, pattern, min(tier(m.cell) for m in members), tuple(members),
                  fixes.get((check, kind)) or fixes.get(("", kind), "") or _raised_fix(kind, fixes))
            for (check, kind, pattern), members in found.items()]
    first = {id(c): i for i, c in enumerate(made)}
    return tuple(sorted(made, key=lambda c: (c.tier, owner is not None and owner not in c.owners,
                                             -len(c.entries), -len(c.members), first[id(c)])))


def _raised_fix(kind: str, fixes: Fixes) -> str:
    """The likely fix of an exception met by several checks: what each check says of one it met, when they agree."""
    if not kind.startswith(RAISED):
        return ""
    said = {fix for (check, declared), fix in fixes.items() if declared.startswith(RAISED) and check}
    return said.pop() if len(said) == 1 else ""


#: How the search names the kind of a target's exception (:func:`audit.engine.explore._raised`): "raised
#: TypeError (at pkg/ops.py:41 in f)". One raising site is one cause in whichever checks met it, as is one of the
#: engine's errors (a worker lost, a proxy at fault): neither is about the check that met it.
RAISED = "raised "
_ENGINE_KINDS = frozenset(kind.value for kind in ErrorKind)


def _key(entry: MatrixEntry, cell: Cell) -> tuple[str, str, str]:
    return identity(cell.check, cell.kind, without_case(cell), (entry.name, entry.target))


def without_case(cell: Cell) -> str:
    """A cell's message without the case the engine appended to it (``; on ([2, 3]) with B=2``): where the failure
    showed differs from entry to entry, what failed does not."""
    if cell.case is None or WHERE not in cell.message:
        return cell.message
    return cell.message.rsplit(WHERE, 1)[0]

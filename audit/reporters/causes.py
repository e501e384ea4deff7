"""The failures grouped by cause, as every reporter shows them: a heading per tier, then per cause its one line,
owners, entries and cells (collapsed beyond a few), the smallest failing case's replay and the likely fix."""

from __future__ import annotations

import functools
import hashlib

from audit.core.contract import Status
from audit.reporters.common import SHOWN, also_lines, failure_line
from audit.results.causes import RAISED, TIER_TITLES, Cause, Fixes, Member, Tier, causes
from audit.results.kinds import FIXES as ERROR_FIXES
from audit.results.kinds import ErrorKind
from audit.results.matrix import Matrix

#: A cause's cells spelled out in full before the rest are counted.
LISTED = 3


@functools.cache
def builtin_fixes() -> Fixes:
    """The likely fix of each declared kind: the built-in checks' declarations and the engine's error kinds."""
    from audit.checks import declarations

    found = {(name, kind): fix for name, check in declarations().items() for kind, fix in check.fixes}
    return found | {("", kind.value): fix for kind, fix in ERROR_FIXES.items()}


def grouped(matrix: Matrix, owner: str | None = None, statuses: tuple[Status, ...] = SHOWN) -> tuple[Cause, ...]:
    """The matrix's causes in report order (``owner``'s first within each tier), with the built-in fixes."""
    return causes(matrix, builtin_fixes(), owner=owner, statuses=statuses)


def rule_id(cause: Cause) -> str:
    """A short id that stays put across runs while the cause does: ``gradcheck/3f2a9c1e``."""
    digest = hashlib.sha256(f"{cause.check}|{cause.kind}|{cause.pattern}".encode()).hexdigest()[:8]
    return f"{cause.check or _family(cause.kind)}/{digest}"


def _family(kind: str) -> str:
    """What a cause that is not one check's is (a rule id's first part): a load failure, a raise, an engine error."""
    if kind == ErrorKind.NOT_LOADED.value:
        return "not-loaded"
    return "raised" if kind.startswith(RAISED) else "error"


def listed(cause: Cause) -> tuple[list[Member], int]:
    """The members spelled out (the smallest first, then in matrix order, up to LISTED), and how many are not."""
    smallest = cause.smallest
    order = [smallest] + [m for m in cause.members if m is not smallest]
    return order[:LISTED], max(0, len(order) - LISTED)


def counts(cause: Cause) -> str:
    """How many cells in how many entries, every entry named, and the dtypes: ``11 cells in 4 entries (cube,
    softplus, sincos, spike) in float64, float32``."""
    cells, entries = len(cause.members), len(cause.entries)
    return (f"{cells} cell{'s' * (cells != 1)} in {entries} entr{'ies' if entries != 1 else 'y'} "
            f"({', '.join(cause.entries)}) in {', '.join(cause.dtypes)}")


def summary(cause: Cause) -> str:
    """How many cells and entries, and who owns them: ``11 cells in 4 entries (...); owners @a, @b``."""
    return f"{counts(cause)}; owner{'s' * (len(cause.owners) != 1)} {', '.join(cause.owners)}"


def tier_heading(tier: Tier, found: tuple[Cause, ...]) -> str:
    """``Failures of claimed cells: 3 causes, 2 owners``."""
    mine = [c for c in found if c.tier is tier]
    owners = {o for c in mine for o in c.owners}
    return (f"{TIER_TITLES[tier][0].upper()}{TIER_TITLES[tier][1:]}: {len(mine)} cause{'s' * (len(mine) != 1)}, "
            f"{len(owners)} owner{'s' * (len(owners) != 1)}")


def tiers(found: tuple[Cause, ...]) -> list[tuple[Tier, list[tuple[int, Cause]]]]:
    """The causes under their tier, numbered across the report from 1."""
    numbered = list(enumerate(found, 1))
    return [(t, [(i, c) for i, c in numbered if c.tier is t]) for t in Tier if any(c.tier is t for c in found)]


def lines(cause: Cause, registry: str) -> list[tuple[Status, str]]:
    """A cause's lines under its title, each with the status it is shown in: its summary, its likely fix, then
    its listed cells (the smallest first: its replay is the one to run) and a count of the rest."""
    shown, hidden = listed(cause)
    status = shown[0].cell.status
    out = [(status, summary(cause))]
    if cause.fix:
        out.append((status, f"likely fix: {cause.fix}"))
    for member in shown:
        out.append((member.cell.status, failure_line(member.entry, member.cell, registry)))
        out += [(member.cell.status, f"  {a}") for a in also_lines(member.cell)]
    if hidden:
        out.append((status, f"... and {hidden} more cell{'s' * (hidden != 1)} of this cause"))
    return out

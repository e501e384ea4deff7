"""Which cells an entry gets: checks in table order, then dtypes, then devices, in contract order."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING

from audit.catalog.checks import CATALOG
from audit.core.contract import DEVICE_ORDER, DTYPE_ORDER
from audit.registry.model import Entry

if TYPE_CHECKING:  # names only: ``audit list`` plans without importing the cells' module or the checks' code
    from audit.catalog.interface import Check
    from audit.results.outcome import CellKey

#: Contract order as a rank: sorting by a dict lookup, not ``tuple.index`` (1,000 entries x 25 checks).
_DTYPE_RANK = {dtype: rank for rank, dtype in enumerate(DTYPE_ORDER)}
_BUILTIN = frozenset(CATALOG)


def plan(entry: Entry, checks: Mapping[str, Check], *, only: Collection[str] | None = None,
         devices: Collection[str] | None = None) -> list[CellKey]:
    """The entry's cells; ``only`` limits the checks, ``devices`` the devices."""
    from audit.results.outcome import CellKey  # here: ``audit list`` plans without cells, and without their module

    chosen = [d for d in entry_devices(entry) if devices is None or d in devices]
    return [CellKey(name, dtype, device) for name, dtypes in planned_checks(entry, checks, only=only)
            for dtype in dtypes for device in chosen]


def planned_checks(entry: Entry, checks: Mapping[str, Check], *,
                   only: Collection[str] | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """(name, dtypes in contract order) of each check the entry gets, in table order: :func:`plan` before
    its devices (each check's cells are its dtypes times the entry's devices)."""
    found: list[tuple[str, tuple[str, ...]]] = []
    for name, check in checks.items():
        if only and name not in only:
            continue
        if (name in _BUILTIN or name in entry.checks) and entry.kind in check.kinds and check.applies(entry):
            found.append((name, tuple(sorted(check.dtypes(entry), key=_DTYPE_RANK.__getitem__))))
    return found


def entry_devices(entry: Entry) -> list[str]:
    """The entry's devices in contract order."""
    return sorted(entry.supports.devices, key=DEVICE_ORDER.index)


def claims(entry: Entry, checks: Mapping[str, Check], keys: Iterable[CellKey]) -> dict[CellKey, bool]:
    """Whether each cell's property is claimed (or always required) for ``entry``."""
    return {key: claimed(entry, checks[key.check], key) for key in keys}


def claimed(entry: Entry, check: Check, key: CellKey) -> bool:
    """The check's claim, narrowed to the cell's dtype where the check probes unclaimed dtypes."""
    return claimed_in(entry, check, key.dtype)


def claimed_in(entry: Entry, check: Check, dtype: str) -> bool:
    """The check's claim for ``entry`` in ``dtype`` (any device: a claim does not depend on it)."""
    return bool(check.claimed(entry)) and (check.dtype_claimed is None or check.dtype_claimed(entry, dtype))

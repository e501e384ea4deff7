"""Which cells an entry gets: checks in table order, then dtypes, then devices, in contract order."""

from __future__ import annotations

from audit.contract import DEVICE_ORDER, DTYPE_ORDER
from audit.registry.model import Entry
from audit.results.outcome import CellKey


def plan(entry: Entry, checks: dict, *, only=None, devices=None) -> list[CellKey]:
    """The entry's cells; ``only`` limits the checks, ``devices`` the devices."""
    keys = []
    for name, check in checks.items():
        if only and name not in only:
            continue
        if not (_selected(entry, name) and entry.kind in check.kinds and check.applies(entry)):
            continue
        for dtype in sorted(check.dtypes(entry), key=DTYPE_ORDER.index):
            for device in sorted(entry.supports.devices, key=DEVICE_ORDER.index):
                if devices is None or device in devices:
                    keys.append(CellKey(name, dtype, device))
    return keys


def _selected(entry: Entry, name: str) -> bool:
    from audit.contract import CHECK_NAMES

    return name in CHECK_NAMES or name in entry.checks


def claims(entry: Entry, checks: dict, keys) -> dict[CellKey, bool]:
    """Whether each cell's property is claimed (or always required) for ``entry``."""
    return {key: claimed(entry, checks[key.check], key) for key in keys}


def claimed(entry: Entry, check, key: CellKey) -> bool:
    """The check's claim, narrowed to the cell's dtype where the check probes unclaimed dtypes."""
    return bool(check.claimed(entry)) and (check.dtype_claimed is None or check.dtype_claimed(entry, key.dtype))

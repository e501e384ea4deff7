"""What a matrix object read from JSON keeps so that writing it back gives the same JSON: the keys this
version does not model (a newer audit's, a tool's), and which modelled keys the file left out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def unknown(data: Mapping[str, Any], known: Iterable[str]) -> dict[str, Any]:
    """The keys of ``data`` outside ``known``, with their values: written back as they came."""
    known = set(known)
    return {key: value for key, value in data.items() if key not in known}


def missing(data: Mapping[str, Any], written: Iterable[str]) -> frozenset[str]:
    """The keys in ``written`` (those :meth:`to_json` always writes) that ``data`` does not have."""
    return frozenset(key for key in written if key not in data)


def restore(data: dict[str, Any], extra: Mapping[str, Any], absent: frozenset[str]) -> dict[str, Any]:
    """``data`` with the ``extra`` keys added back and the ``absent`` ones left out again."""
    data.update(extra)
    for key in absent:
        data.pop(key, None)
    return data

"""What a matrix object read from JSON keeps so that writing it back gives the same JSON: the keys this
version does not model (a newer audit's, a tool's), and which modelled keys the file left out."""

from __future__ import annotations

from collections.abc import Iterable, Mapping


def unknown(data: Mapping, known: Iterable[str]) -> dict:
    """The keys of ``data`` outside ``known``, with their values: written back as they came."""
    known = set(known)
    return {key: value for key, value in data.items() if key not in known}


def missing(data: Mapping, written: Iterable[str]) -> frozenset[str]:
    """The keys in ``written`` (those :meth:`to_json` always writes) that ``data`` does not have."""
    return frozenset(key for key in written if key not in data)


def restore(data: dict, extra: Mapping, absent: frozenset[str]) -> dict:
    """``data`` with the ``extra`` keys added back and the ``absent`` ones left out again."""
    data.update(extra)
    for key in absent:
        data.pop(key, None)
    return data

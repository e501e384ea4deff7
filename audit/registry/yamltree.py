"""YAML to plain data, remembering where every key and item sits in the file."""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field

import yaml

Path = tuple  # a key path: strings for mapping keys, ints for list items


@dataclass
class Located:
    """Plain data from a YAML document, and the (line, column) of each path, 1-based."""

    data: object
    marks: dict = field(default_factory=dict)
    key_marks: dict = field(default_factory=dict)
    duplicates: list = field(default_factory=list)

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """The closest known position of ``path`` (the key itself when ``key``)."""
        if key and path in self.key_marks:
            return self.key_marks[path]
        while path not in self.marks and path:
            path = path[:-1]
        return self.marks.get(path, (1, 1))


#: libyaml's parser when PyYAML was built with it (about 4x faster on large registries); same nodes and marks.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str) -> Located:
    """Compose ``text`` and convert it; raises ``yaml.YAMLError`` on a syntax error."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    located = Located(data=None)
    located.data = _convert(node, (), located, loader) if node is not None else None
    return located


def _mark(node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _convert(node, path: Path, located: Located, loader):
    located.marks[path] = _mark(node)
    if isinstance(node, yaml.MappingNode):
        return _mapping(node, path, located, loader)
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, path + (i,), located, loader) for i, item in enumerate(node.value)]
    try:
        value = loader.construct_object(node)
    except ValueError:  # a date-like scalar that is no real date, e.g. 2027-02-30
        return node.value
    return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value


def _mapping(node, path: Path, located: Located, loader) -> dict:
    result: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node)
        key = key if isinstance(key, str) else str(key)
        if key in result:
            located.duplicates.append((path + (key,), _mark(key_node)))
        located.key_marks[path + (key,)] = _mark(key_node)
        result[key] = _convert(value_node, path + (key,), located, loader)
    return result


def dotted(path: Path) -> str:
    """``('entries', 0, 'supports')`` as ``entries[0].supports``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text

"""YAML to plain data, remembering where every key and item sits in the file."""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field

import yaml

Path = tuple  # a key path: strings for mapping keys, ints for list items

#: Nesting deeper than this is no registry (and would exhaust Python's recursion).
MAX_DEPTH = 64
#: Aliases may repeat nodes, but not expand the document past this many converted nodes and this many
#: times its distinct nodes: a few hundred bytes of nested aliases ("billion laughs") would otherwise
#: take minutes and gigabytes.
MAX_EXPANDED_NODES = 10_000
MAX_EXPANSION = 10
#: The tags a registry may carry: YAML's core schema, resolved implicitly or spelled out (merge keys
#: get through here, to be refused as an unknown key).
PLAIN_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in
                       ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "merge"))
#: A number in exponent form without a dot (``1e-3``): YAML 1.2 reads it as a float, PyYAML (YAML 1.1) as a
#: string, which would turn ``atol: 1e-3`` into "expected a number, got '1e-3'".
_EXPONENT_FLOAT = re.compile(r"[-+]?[0-9]+[eE][-+]?[0-9]+")


class Refused(yaml.YAMLError):
    """The document is well-formed YAML, but not something a registry may be; says where and why."""

    def __init__(self, node, path: Path, message: str):
        super().__init__(message)
        self.line, self.column = _mark(node)
        self.path, self.message = path, message


@dataclass
class Located:
    """Plain data from a YAML document, and the (line, column) of each path, 1-based."""

    data: object
    marks: dict = field(default_factory=dict)
    key_marks: dict = field(default_factory=dict)
    duplicates: list = field(default_factory=list)
    converted: int = 0
    distinct: set = field(default_factory=set)
    open_nodes: set = field(default_factory=set)

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
    """Compose ``text`` and convert it; raises ``yaml.YAMLError`` on a syntax error and :class:`Refused`
    on aliases that recurse or expand too far, nesting too deep, or a tag other than YAML's own."""
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
    _admit(node, path, located)
    located.marks[path] = _mark(node)
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        located.open_nodes.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return _mapping(node, path, located, loader)
            return [_convert(item, path + (i,), located, loader) for i, item in enumerate(node.value)]
        finally:
            located.open_nodes.discard(id(node))
    if node.tag == "tag:yaml.org,2002:str" and not node.style and _EXPONENT_FLOAT.fullmatch(node.value):
        return float(node.value)  # plain (unquoted) only: a quoted "1e-3" stays the string it says it is
    try:
        value = loader.construct_object(node)
    except ValueError:  # a date-like scalar that is no real date, e.g. 2027-02-30
        return node.value
    return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value


def _admit(node, path: Path, located: Located) -> None:
    """Refuse what no registry needs and what would make conversion unbounded."""
    if id(node) in located.open_nodes:
        raise Refused(node, path, "a recursive alias: this node contains itself")
    if len(path) > MAX_DEPTH:
        raise Refused(node, path, f"expected at most {MAX_DEPTH} levels of nesting")
    if node.tag not in PLAIN_TAGS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise Refused(node, path, f"expected plain YAML, got the tag {tag!r} (tags are not allowed)")
    located.converted += 1
    located.distinct.add(id(node))
    if located.converted > max(MAX_EXPANDED_NODES, MAX_EXPANSION * len(located.distinct)):
        raise Refused(node, path, f"aliases expand the document past {located.converted:,} nodes from "
                                  f"{len(located.distinct):,} written ones; write the values out instead")


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

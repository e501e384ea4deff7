"""YAML to plain data, remembering where every key and item sits in the file."""

from __future__ import annotations

import datetime
import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import yaml

Path = tuple[str | int, ...]  # a key path: strings for mapping keys, ints for list items

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

    def __init__(self, node: yaml.Node, path: Path, message: str):
        super().__init__(message)
        self.line, self.column = _mark(node)
        self.path, self.message = path, message


@dataclass
class Located:
    """Plain data from a YAML document, and the (line, column) of each path, 1-based: ``marks`` and
    ``key_marks`` hold each path's node and key node, whose position is read only when asked for (most
    registries need a few of 20,000). ``aliased``: whether the text may hold an alias, the only way a node is
    converted twice; without one, the bookkeeping that bounds what aliases expand to has nothing to do."""

    data: object
    marks: dict[Path, yaml.Node] = field(default_factory=dict)
    key_marks: dict[Path, yaml.Node] = field(default_factory=dict)
    duplicates: list[tuple[Path, tuple[int, int]]] = field(default_factory=list)
    converted: int = 0
    distinct: set[int] = field(default_factory=set)
    open_nodes: set[int] = field(default_factory=set)
    aliased: bool = True

    def where(self, path: Path, *, key: bool = False) -> tuple[int, int]:
        """The closest known position of ``path`` (the key itself when ``key``)."""
        if key and path in self.key_marks:
            return _mark(self.key_marks[path])
        while path not in self.marks and path:
            path = path[:-1]
        return _mark(self.marks[path]) if path in self.marks else (1, 1)


#: libyaml's parser when PyYAML was built with it (about 4x faster on large registries); same nodes and marks.
if TYPE_CHECKING:
    _BASE_LOADER = yaml.SafeLoader
else:
    _BASE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):
    """The safe loader, with the resolver's per-node calls made cheap: the composer calls them from C around every
    node, and they are Python even under libyaml. Without path resolvers (a safe loader has none), a scalar's tag
    depends on its kind, value and implicitness alone, so each distinct scalar is resolved once (a registry repeats
    most of its scalars: keys, dim names, dtypes), and descending into a node and back has nothing to do."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.reused: dict[tuple[str, str], object] = {}  # (tag, text) -> the value, for the scalars of _SCALAR_TAGS
        if not self.yaml_path_resolvers:
            self.resolve = functools.lru_cache(maxsize=None)(super().resolve)  # type: ignore[method-assign]
            self.descend_resolver, self.ascend_resolver = _IGNORE_TWO, _IGNORE_NONE  # type: ignore[assignment]

    def dispose(self) -> None:
        """Also drop the tag cache, which refers back to the loader: no cycle left for the collector to find."""
        super().dispose()
        self.__dict__.pop("resolve", None)


#: C callables that do nothing with their arguments (a Python no-op costs a frame per node).
_IGNORE_TWO, _IGNORE_NONE = {}.get, type(None)  # type: ignore[var-annotated]


_LOADER = _Loader


def parse(text: str) -> Located:
    """Compose ``text`` and convert it; raises ``yaml.YAMLError`` on a syntax error and :class:`Refused`
    on aliases that recurse or expand too far, nesting too deep, or a tag other than YAML's own."""
    loader = _LOADER(text)
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    located = Located(data=None, aliased="*" in text)  # an alias is written *name
    located.data = _convert(node, (), located, loader) if node is not None else None
    return located


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


def _convert(node: yaml.Node, path: Path, located: Located, loader: _Loader) -> Any:
    if located.aliased:
        _admit(node, path, located)
    elif len(path) > MAX_DEPTH or node.tag not in PLAIN_TAGS:
        _refuse(node, path, located)
    located.marks[path] = node
    if node.__class__ is _SCALAR:
        return _scalar(node, loader)
    if not located.aliased:
        return _collection(node, path, located, loader)
    located.open_nodes.add(id(node))
    try:
        return _collection(node, path, located, loader)
    finally:
        located.open_nodes.discard(id(node))


def _collection(node: yaml.Node, path: Path, located: Located, loader: _Loader) -> Any:
    if node.__class__ is _MAPPING:
        return _mapping(node, path, located, loader)
    return [_convert(item, path + (i,), located, loader) for i, item in enumerate(node.value)]


#: The composer's node classes (compared by identity: ``isinstance`` per node shows on 20,000 nodes).
_SCALAR, _MAPPING = yaml.ScalarNode, yaml.MappingNode
#: Scalar tags whose constructor is a plain function of the node's text, with an immutable result: called
#: directly, not through ``construct_object``'s bookkeeping (a third of the conversion), and once per distinct
#: text (the constructors are Python, and a registry repeats its sizes and dim ranges); other tags on a scalar
#: go the long way.
_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("int", "float", "bool", "null", "timestamp"))
_STR_TAG = "tag:yaml.org,2002:str"


def _scalar(node: yaml.ScalarNode, loader: _Loader) -> Any:
    if node.tag == _STR_TAG:
        # plain (unquoted) only: a quoted "1e-3" stays the string it says it is
        return float(node.value) if not node.style and _EXPONENT_FLOAT.fullmatch(node.value) else node.value
    if node.tag not in _SCALAR_TAGS:
        return _constructed(node, loader)
    key = (node.tag, node.value)  # one value for every repeat of the text: it is immutable and a function of it
    if key not in loader.reused:
        loader.reused[key] = _constructed(node, loader)
    return loader.reused[key]


def _constructed(node: yaml.Node, loader: _Loader) -> Any:
    try:
        if node.tag in _SCALAR_TAGS:
            value = loader.yaml_constructors[node.tag](loader, node)
        else:
            value = loader.construct_object(node)
    except ValueError:  # a date-like scalar that is no real date, e.g. 2027-02-30
        return node.value
    return value.isoformat() if isinstance(value, (datetime.date, datetime.datetime)) else value


def _admit(node: yaml.Node, path: Path, located: Located) -> None:
    """Refuse what no registry needs and what would make conversion unbounded."""
    if id(node) in located.open_nodes or len(path) > MAX_DEPTH or node.tag not in PLAIN_TAGS:
        _refuse(node, path, located)
    located.converted += 1
    located.distinct.add(id(node))
    if located.converted > MAX_EXPANDED_NODES and located.converted > MAX_EXPANSION * len(located.distinct):
        raise Refused(node, path, f"aliases expand the document past {located.converted:,} nodes from "
                                  f"{len(located.distinct):,} written ones; write the values out instead")


def _refuse(node: yaml.Node, path: Path, located: Located) -> None:
    """The first of: a node inside itself, nesting too deep, a tag."""
    if id(node) in located.open_nodes:
        raise Refused(node, path, "a recursive alias: this node contains itself")
    if len(path) > MAX_DEPTH:
        raise Refused(node, path, f"expected at most {MAX_DEPTH} levels of nesting")
    tag = node.tag.replace("tag:yaml.org,2002:", "!!")
    raise Refused(node, path, f"expected plain YAML, got the tag {tag!r} (tags are not allowed)")


def _mapping(node: yaml.Node, path: Path, located: Located, loader: _Loader) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        if key_node.tag == _STR_TAG and key_node.__class__ is _SCALAR:
            key = key_node.value  # what construct_object gives, without its bookkeeping
        else:
            key = loader.construct_object(key_node)
            key = key if isinstance(key, str) else str(key)
        inner = path + (key,)
        if key in result:
            located.duplicates.append((inner, _mark(key_node)))
        located.key_marks[inner] = key_node
        result[key] = _convert(value_node, inner, located, loader)
    return result


def dotted(path: Path) -> str:
    """``('entries', 0, 'supports')`` as ``entries[0].supports``."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text

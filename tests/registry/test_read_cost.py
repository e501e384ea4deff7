"""The shortcuts of reading a registry change its cost, nothing else: cycle collection is paused, then as it
was; a text without aliases is converted without their bookkeeping, to the same data at the same positions."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from audit.core.errors import RegistryError
from audit.registry import load as load_mod
from audit.registry import semantics
from audit.registry.load import parse_registry
from audit.registry.yamltree import parse

ROOT = Path(__file__).resolve().parents[2]

GOOD = b"""\
version: 1
entries:
  - {name: cube, owner: "@t", target: m:F, inputs: [{shape: [B]}]}
"""
BAD = [b"version: 1\nentries: [ {name: a\n", b"version: 1\nentries: [{name: a}]\n", b"&a [*a]\n"]


@pytest.fixture
def collection_state():
    """Runs the test with collection on and with it off; restores it."""
    enabled = gc.isenabled()
    yield
    gc.enable() if enabled else gc.disable()


def test_collection_is_paused_while_entries_are_built(monkeypatch, collection_state):
    """The objects of a read are made with cycle collection off (each collection would traverse them all)."""
    seen = []
    build = load_mod.build_entry
    monkeypatch.setattr(load_mod, "build_entry", lambda *args: seen.append(gc.isenabled()) or build(*args))
    gc.enable()
    parse_registry(GOOD, "r.yaml")
    assert seen == [False] and gc.isenabled()


@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("text", [GOOD] + BAD)
def test_collection_is_left_as_it_was_found(text, enabled, collection_state):
    """On or off before, the same after: a valid registry, broken YAML, a schema error, a recursive alias."""
    gc.enable() if enabled else gc.disable()
    try:
        parse_registry(text, "r.yaml")
    except RegistryError:
        assert text in BAD
    assert gc.isenabled() == enabled


KEYS = """\
version: 1
1: [a, {b: 2, 3: [4.5, null, 2027-01-02]}]
entries:
  - {name: "x", owner: '@t', inputs: [{shape: [B, 3]}], dims: {B: [0, 2]}}
"""


@pytest.mark.parametrize("text", [(ROOT / "registry.yaml").read_text(), GOOD.decode(), KEYS])
def test_a_text_without_aliases_converts_as_one_with_them(text):
    """The same document, once with a ``*`` in a comment (the alias bookkeeping on): same data, and every path
    and key at the same line and column, missing paths at their closest known one."""
    plain, aliased = parse(text), parse(text + "# *\n")
    assert (plain.aliased, aliased.aliased) == (False, True)
    assert plain.data == aliased.data and plain.marks.keys() == aliased.marks.keys()
    paths = list(aliased.marks) + [p + ("missing", 7) for p in aliased.marks]
    assert [plain.where(p) for p in paths] == [aliased.where(p) for p in paths]
    assert [plain.where(p, key=True) for p in paths] == [aliased.where(p, key=True) for p in paths]
    assert len({plain.where(p) for p in paths}) > 3


def _shape(node):
    """A composed node as plain data: its class, tag, position and value (its items, for a collection)."""
    value = node.value if isinstance(node.value, str) else [
        tuple(map(_shape, item)) if isinstance(item, tuple) else _shape(item) for item in node.value]
    return type(node).__name__, node.tag, node.start_mark.line, node.start_mark.column, value


TAGGED = """\
a: [1, 1.5, 1e3, "2", '3', true, yes, null, ~, 2027-01-02, 0x1f, .inf, x]
b: {1: one, 2.5: two, null: three, c: &c [d, d]}
e: *c
f: [1, "1", 1, '1', true, "true"]
"""


def test_the_cheap_resolver_composes_what_the_plain_one_does():
    """The loader's cached tags and no-op descents give the nodes (tags, positions) the plain safe loader gives."""
    from audit.registry.yamltree import _LOADER, _BASE_LOADER

    for text in (TAGGED, (ROOT / "registry.yaml").read_text()):
        assert _shape(_LOADER(text).get_single_node()) == _shape(_BASE_LOADER(text).get_single_node())


def test_a_path_resolver_keeps_the_full_resolver():
    """With a path resolver the tag depends on where a scalar sits: no cache, the resolver's own descent."""
    from audit.registry.yamltree import _LOADER

    class Pathed(_LOADER):
        pass

    Pathed.add_path_resolver("!here", ["a"], dict)
    node = Pathed("a: {x: 1}\nb: {x: 1}\n").get_single_node()
    assert [value.tag for _, value in node.value] == ["!here", "tag:yaml.org,2002:map"]


def test_a_disposed_loader_is_freed_at_once(collection_state):
    """Its tag cache refers back to it: dispose breaks that cycle, so the text and parser go without a collection."""
    import weakref

    from audit.registry.yamltree import _LOADER

    gc.disable()
    loader = _LOADER(TAGGED)
    loader.get_single_node()
    loader.dispose()
    gone = weakref.ref(loader)
    del loader
    assert gone() is None


SCALARS = ("[1, 1, 0x1f, 31, !!float 1, 1.0, '1', true, yes, True, !!str true, null, ~, Null, !!int '7', 7, 1e3, -0, "
           "0, 1.5, 1.5, 2027-01-02, 2027-01-02, 2027-02-30, !!timestamp 2027-01-02, .nan, .nan]\n")
#: What the registry reads: PyYAML's values and types, but 1e3 a float, a date its ISO text, a date that is none its
#: text.
READ = [1, 1, 31, 31, 1.0, 1.0, "1", True, True, True, "true", None, None, None, 7, 7, 1000.0, 0, 0, 1.5, 1.5,
        "2027-01-02", "2027-01-02", "2027-02-30", "2027-01-02"]


def test_repeated_scalars_convert_as_the_plain_loader_gives_them():
    """Each repeat of a scalar's text under one tag reuses one value, of the right value and type."""
    *data, nan, again = parse(SCALARS).data
    assert [(type(v), v) for v in data] == [(type(v), v) for v in READ]
    assert nan != nan and again is nan  # PyYAML's own .nan is one object too
    first, second = parse("[123456789, 123456789]\n").data
    assert first is second  # constructed once (CPython keeps no such int of its own)


def test_each_entry_naming_a_bad_handle_is_reported():
    """A handle is judged once, its verdict reused: every entry that names a bad one is still told so."""
    text = b"version: 1\nentries:\n" + b"".join(
        b'  - {name: e%d, owner: "%s", target: m:F, inputs: [{shape: [1]}]}\n' % (i, owner)
        for i, owner in enumerate([b"@a", b"<b>", b"@a", b"<b>", b"@a b"]))
    with pytest.raises(RegistryError) as raised:
        parse_registry(text, "r.yaml")
    assert [p.path for p in raised.value.problems] == ["entries[1].owner", "entries[3].owner", "entries[4].owner"]
    assert semantics._bad_handle.cache_info().hits >= 2


def test_entries_share_equal_claims_and_keep_their_own():
    """Equal claims are one Supports object (as the default training settings are one); differing claims not."""
    claims = ["{vmap: true}", "{vmap: false}", "{vmap: true}", "{compile: fullgraph}", "{compile: true}", "{}"]
    text = "version: 1\nentries:\n" + "".join(
        f"  - {{name: e{i}, owner: '@a', target: m:F, inputs: [{{shape: [1]}}], supports: {c}}}\n"
        for i, c in enumerate(claims))
    entries = parse_registry(text.encode(), "r.yaml").entries
    got = [(e.supports.vmap, e.supports.compile) for e in entries]
    assert got == [(True, False), (False, False), (True, False), (False, "fullgraph"), (False, True), (False, False)]
    assert entries[0].supports is entries[2].supports and entries[0].training is entries[1].training

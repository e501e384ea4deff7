"""The shortcuts of reading a registry change its cost, nothing else: cycle collection is paused, then as it
was; a text without aliases is converted without their bookkeeping, to the same data at the same positions."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from audit.errors import RegistryError
from audit.registry import load as load_mod
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
    assert len(set(plain.where(p) for p in paths)) > 3

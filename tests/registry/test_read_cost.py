"""What reading a registry does to the process beyond its result: cycle collection paused, then as it was."""

from __future__ import annotations

import gc

import pytest

from audit.errors import RegistryError
from audit.registry import load as load_mod
from audit.registry.load import parse_registry

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

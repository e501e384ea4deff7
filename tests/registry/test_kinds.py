"""Entry kinds are one enum: the schema's choices, the built entries' type, and the registry's spelling wherever a
kind is written (reports, messages, replay scripts)."""

from __future__ import annotations

import json
from importlib import resources

from audit.registry.load import parse_registry
from audit.registry.model import DEFAULT_KIND, LAYER_KINDS, EntryKind


def _schema_kinds() -> list[list[str]]:
    schema = json.loads(resources.files("audit.schema").joinpath("registry.schema.json").read_text())
    return [schema["properties"]["entries"]["items"]["properties"]["kind"]["enum"],
            schema["properties"]["defaults"]["properties"]["kind"]["enum"]]


def test_the_schema_offers_exactly_the_enums_kinds_in_its_order():
    for offered in _schema_kinds():
        assert offered == [kind.value for kind in EntryKind]


def test_a_built_entry_carries_the_enum_and_an_unsaid_kind_is_the_default():
    text = ("version: 1\nentries:\n  - {name: a, owner: '@o', target: 'm:F', inputs: [{shape: [2]}]}\n"
            "  - {name: b, owner: '@o', kind: op, target: 'ns::op', inputs: [{shape: [2]}]}\n")
    first, second = parse_registry(text.encode(), "r.yaml").entries
    assert first.kind is DEFAULT_KIND is EntryKind.FUNCTION and second.kind is EntryKind.OP


def test_a_kind_reads_as_the_registry_spells_it():
    kind = EntryKind.MODULE
    assert kind == "module" and "module" in LAYER_KINDS and kind in LAYER_KINDS
    assert (str(kind), f"[{kind}]", f"{kind!r}", json.dumps(kind)) == ("module", "[module]", "'module'", '"module"')
    assert eval(repr(kind)) == kind  # replay scripts embed it as a literal

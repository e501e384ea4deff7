"""``audit list`` plans each distinct entry shape once: the memo must never hand one entry another's plan."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import fields, replace
from pathlib import Path

import pytest

from audit.checks import declarations
from audit.catalog.interface import Check
from audit.commands.listing import UNREAD_BY_DECLARATIONS, Summaries, plan_key, summarise
from audit.registry.load import load_registry
from audit.registry.model import Entry, Supports, TensorSpec, ValueSpec

ROOT = Path(__file__).resolve().parents[2]


def _entries() -> list[Entry]:
    """The repository's own registries (every kind, claim and input shape they hold), and variations."""
    found = [e for name in ("registry.yaml", "bench/registry.yaml") for e in load_registry(ROOT / name).entries]
    base = found[0]
    found += [replace(base, kind="op", target="ns::op"), replace(base, supports=Supports(dtypes=("complex128",))),
              replace(base, batch="B", dims=(("B", 0, 3),)), replace(base, reference="m:ref"),
              replace(base, inputs=base.inputs + (TensorSpec(shape=("B",), requires_grad=False),))]
    return found


class _Guarded(Entry):
    """An entry whose unread fields cannot be read."""

    def __getattribute__(self, name):
        if name in UNREAD_BY_DECLARATIONS:
            raise AssertionError(f"planning read entry.{name}, which the list's memo leaves out of its key")
        return super().__getattribute__(name)


def test_the_declarations_read_no_field_the_memo_key_leaves_out():
    """Every built-in declaration plans every kind of entry without touching name, line, owners or target."""
    checks = declarations()
    for entry in _entries():
        guarded = _Guarded(**{f.name: getattr(entry, f.name) for f in fields(Entry)})
        assert summarise(guarded, checks) == summarise(entry, checks)


def test_the_memo_key_holds_every_other_field():
    """Two entries that differ in any field but the unread ones have different keys (a new field joins it)."""
    entry = _entries()[0]
    for field in fields(Entry):
        changed = replace(entry, **{field.name: object()})
        assert (plan_key(changed) == plan_key(entry)) == (field.name in UNREAD_BY_DECLARATIONS), field.name


def test_one_memo_gives_every_entry_its_own_plan():
    """Through one memo, each entry's summary is the one planned for it alone, renamed copies included."""
    checks = declarations()
    entries = _entries()
    entries += [replace(e, name=f"{e.name}_copy", owners=("@other",), line=e.line + 100) for e in entries]
    summary = Summaries(checks)
    assert [summary(e) for e in entries] == [summarise(e, checks) for e in entries]
    assert len({summary(e) for e in entries}) > 5  # the registries hold differently planned entries


def test_an_unhashable_argument_is_planned_without_the_memo():
    """A list passed as a value argument (``value: [1, 2]``) cannot key the memo; the entry is still listed."""
    entry = _entries()[0]
    entry = replace(entry, inputs=entry.inputs + (ValueSpec([1, 2]),))
    assert Summaries(declarations())(entry) == summarise(entry, declarations())


def test_a_local_check_turns_the_memo_off():
    """A repository's own check may read any field, the entry's name included: each entry is planned."""
    by_name = Check(name="by_name", contract="x", run=print, applies=lambda entry: entry.name == "one")
    checks = {**declarations(), "by_name": by_name}
    one = replace(_entries()[0], name="one", checks=("by_name",))
    summary = Summaries(checks)
    assert "by_name" in summary(one) and "by_name" not in summary(replace(one, name="two"))


@pytest.mark.parametrize("registry", ["registry.yaml", "bench/registry.yaml"])
def test_the_memo_is_on_for_the_built_in_table(registry):
    """The memo serves a registry without local checks (else the tests above prove nothing about the path)."""
    summary = Summaries(declarations())
    entries = load_registry(ROOT / registry).entries
    assert [summary(e) for e in entries] == [summarise(e, declarations()) for e in entries] and summary.seen


#: What ``audit list`` does not need: torch, jsonschema (a valid registry), the cells' module, and
#: importlib.resources (tempfile, shutil, zipfile...: more than the schema's read).
UNNEEDED = ("torch", "jsonschema", "audit.results.outcome", "importlib.resources")


def test_list_imports_nothing_it_does_not_need(write_registry):
    """A module set to None in sys.modules fails its import: the listing runs through without any of them."""
    registry = write_registry([{"name": f"e{i}", "target": "m:F", "inputs": [{"shape": ["N"]}]} for i in range(3)],
                              defaults={"owner": "@t"})
    blocked = "; ".join(f"sys.modules[{name!r}] = None" for name in UNNEEDED)
    code = f"import sys; {blocked}; sys.argv[0] = 'audit'; from audit.cli import main; main()"
    listed = subprocess.run([sys.executable, "-c", code, "list", "--registry", str(registry)], cwd=ROOT,
                            capture_output=True, text=True)
    assert listed.returncode == 0 and listed.stdout.startswith("e0  [function] m:F  owner @t"), listed.stderr

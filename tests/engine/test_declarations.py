"""A local check's stored declaration plans, keys and judges as the check itself does."""

from __future__ import annotations

from dataclasses import replace

from audit.checks import local_check
from audit.engine import declarations
from audit.engine.plan import claims, plan
from audit.registry.load import load_registry
from tests.conftest import ROOT


def test_a_stand_in_plans_and_claims_as_the_check_it_stands_for(tmp_path):
    registry = load_registry(str(ROOT / "registry.yaml"))
    real = local_check(ROOT / "checks" / "simplex.py")
    first = declarations.local_table(ROOT / "checks", registry.entries, tmp_path)  # imports it, and stores it
    second = declarations.local_table(ROOT / "checks", registry.entries, tmp_path)  # from the store
    assert first["simplex"].run is not declarations._not_imported
    assert second["simplex"].run is declarations._not_imported
    assert len(list((tmp_path / declarations.FOLDER).iterdir())) == 1
    opted = [e for e in registry.entries if "simplex" in e.checks]
    assert opted
    for entry in registry.entries:
        keys = plan(entry, {"simplex": real})
        assert plan(entry, second) == keys
        assert claims(entry, second, keys) == claims(entry, {"simplex": real}, keys)
    stand_in = second["simplex"]
    assert (stand_in.name, stand_in.version, stand_in.claim, stand_in.contract, stand_in.kinds) == (
        real.name, real.version, real.claim, real.contract, real.kinds)


def test_a_declaration_that_lacks_an_entry_is_not_used(tmp_path):
    registry = load_registry(str(ROOT / "registry.yaml"))
    opted = [e for e in registry.entries if "simplex" in e.checks]
    declarations.local_table(ROOT / "checks", opted, tmp_path)
    added = [*opted, replace(opted[0], name="another")]
    again = declarations.local_table(ROOT / "checks", added, tmp_path)  # a new entry opts in: the check is imported
    assert again["simplex"].run is not declarations._not_imported

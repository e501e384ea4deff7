"""The docs cannot drift from the code, and the README stays a README.

The reference pages' generated sections (checks, registry keys, profiles, settings, commands) must equal
what ``docs/generate.py`` renders from the code now; the README is at most 200 lines and keeps the two
commands that set everything up and run the tests.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

from audit.checks import catalog
from tests.helpers import ROOT

SETUP = "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0 -e '.[test]' && .venv/bin/audit run"
TESTS = ".venv/bin/python -m pytest -q"


def _generator():
    spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_pages_are_current():
    assert _generator().stale() == [], "a generated docs section is stale: run python docs/generate.py and commit"


def test_a_changed_contract_makes_the_checks_page_stale(monkeypatch):
    generate = _generator()
    changed = replace(catalog.CATALOG["vmap"], contract="a contract the page does not hold yet")
    monkeypatch.setitem(catalog.CATALOG, "vmap", changed)
    assert generate.stale() == ["docs/checks.md"]


def test_every_check_and_command_is_in_the_reference():
    checks, commands = (ROOT / "docs" / "checks.md").read_text(), (ROOT / "docs" / "commands.md").read_text()
    assert all(f"`{name}`" in checks for name in catalog.CATALOG)
    assert all(f"### `audit {name}`" in commands for name in _generator().cli.commands)


def test_the_readme_is_short_and_keeps_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    assert SETUP in readme and TESTS in readme
    assert "pytest -q -m slow" in readme and ".ci/run" in readme
    assert "audit/runtime/health.py" in readme

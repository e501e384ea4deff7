"""The docs cannot drift from the code, and the README stays a README.

The reference pages' generated sections (checks, registry keys, profiles, settings, commands) must equal
what ``docs/generate.py`` renders from the code now; the README is at most 200 lines and keeps the two
commands that set everything up and run the tests.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

from audit.catalog import checks as catalog
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


def test_the_readme_names_the_stacks_ci_tests():
    """The versions the README's Install section says are tested are the ones CI installs: the first stack's torch
    in .ci/run and Python in the workflow's tests job, the second stack's both in .ci/second-stack."""
    import re

    import yaml

    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "audit.yml").read_text())
    python = next(step["with"]["python-version"] for step in workflow["jobs"]["tests"]["steps"] if "with" in step)
    torch = re.search(r"torch==([\d.]+) -e '\.\[test,docs\]'", (ROOT / ".ci" / "run").read_text())
    second = (ROOT / ".ci" / "second-stack").read_text()
    second_torch, second_python = re.search(r"^TORCH=([\d.]+)$", second, re.M), re.search(r"python(3\.\d+)", second)
    assert torch and second_torch and second_python
    stacks = (f"Tested in CI: Python {python} with torch {torch.group(1)}, and Python {second_python.group(1)} with "
              f"torch {second_torch.group(1)}")
    assert stacks in " ".join((ROOT / "README.md").read_text().split())

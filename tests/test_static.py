"""The static checks configured in pyproject.toml hold where they are required: mypy, strict, over the registry's
entries and the results (audit.registry, audit.results), and ruff over the same packages."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

STRICT = ("audit/results", "audit/registry")


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    pytest.importorskip(module, reason=f"{module} is a test extra: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_mypy_strict_passes_on_the_registry_and_the_results():
    done = _run("mypy", *STRICT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_passes_on_the_registry_and_the_results():
    done = _run("ruff", "check", *STRICT)
    assert done.returncode == 0, done.stdout + done.stderr

"""The static checks configured in pyproject.toml hold, as CI runs them: mypy over the package (strict on the
registry's entries, the results and the engine: audit.registry, audit.results, audit.engine), and ruff over the
package, the tests and the benchmarks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers import ROOT

LINTED = ("audit", "tests", "bench")


def _run(module: str, *args: str) -> subprocess.CompletedProcess:
    pytest.importorskip(module, reason=f"{module} is a test extra: pip install -e '.[test]'")
    return subprocess.run([sys.executable, "-m", module, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)


def test_mypy_passes_strict_where_configured():
    done = _run("mypy")  # pyproject.toml: the files, and which packages are strict
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_passes_on_the_package_the_tests_and_the_benchmarks():
    done = _run("ruff", "check", *LINTED)
    assert done.returncode == 0, done.stdout + done.stderr

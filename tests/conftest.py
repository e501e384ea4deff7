"""Shared test set-up: the repository root importable here and in worker processes."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))


pytest_plugins = ["pytester"]


def pytest_addoption(parser):
    parser.addoption("--update-golden", action="store_true", help="Rewrite the reporters' golden files.")


@pytest.fixture
def write_registry(tmp_path):
    """Write a registry (a dict, or entries with defaults) to a file and return its path."""

    def write(entries, *, defaults=None, name="registry.yaml"):
        document = {"version": 1, "entries": entries}
        if defaults:
            document["defaults"] = defaults
        path = tmp_path / name
        path.write_text(yaml.safe_dump(document, sort_keys=False))
        return path

    return write

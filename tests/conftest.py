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
#: This test session, inherited by every process it starts: a process of another session in the same checkout (CI runs
#: two stacks there at once) is not this one's.
os.environ.setdefault("AUDIT_TEST_SESSION", str(os.getpid()))


def _triton_through_its_interpreter() -> None:
    """Where triton is installed and no CUDA device is: Triton's interpreter for this process (the in-process
    Triton tests), set before anything imports triton, as a worker does at start-up (audit/runtime/triton.py)."""
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")


_triton_through_its_interpreter()

pytest_plugins = ["pytester"]


#: Why a test marked ``gpu`` is a skip on this machine.
NO_CUDA = "needs CUDA: torch.cuda.is_available() is False on this machine"


def pytest_collection_modifyitems(config, items):
    """Every test marked ``gpu`` is a skip, with the reason, where no CUDA device is (pyproject's marker says so)."""
    marked = [item for item in items if item.get_closest_marker("gpu")]
    if not marked:
        return
    import torch

    if not torch.cuda.is_available():
        for item in marked:
            item.add_marker(pytest.mark.skip(reason=NO_CUDA))


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

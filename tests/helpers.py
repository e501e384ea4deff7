"""Helpers that audit one entry in this process (no worker), for fast check-level tests."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from audit.checks import builtin
from audit.engine.cell import run_cell
from audit.registry.load import load_registry
from audit.results.outcome import CellKey
from audit.runtime.options import RunOptions
from audit.runtime.target import resolve

ROOT = Path(__file__).resolve().parent.parent


def entry(tmp_path, **spec):
    """A loaded :class:`Entry` from registry keys; owner and kind have test defaults."""
    spec = {"name": "subject", "owner": "@tests", "kind": "function", **spec}
    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "entries": [spec]}, sort_keys=False))
    return load_registry(path).entries[0]


def observe(entry, check: str, dtype: str = "float64", *, examples: int = 20, seed: int = 0, claimed=True,
            device: str = "cpu", failures: int = 1):
    """The raw outcome of ``check`` on ``entry`` at (dtype, device). ``failures``: the distinct failures a
    failing cell looks for; most tests look at the first (1: no further search); the engine's default is 3."""
    target = resolve(entry, ROOT)
    options = RunOptions(examples=examples, seed=seed, base=str(ROOT), failures=failures)
    return run_cell(entry, target, builtin()[check], CellKey(check, dtype, device), options, claimed)


def matrix_without_timings(text: str) -> dict:
    """A matrix with ``created``, timings and every other volatile field removed: what must be identical."""
    import json

    from audit.results.matrix import volatile_metric

    stable = json.loads(text)
    stable.pop("created", None)
    for entry in stable.get("entries", []):
        for cell in entry.get("cells", []):
            cell.pop("seconds", None)
            metrics = cell.get("metrics")
            for name in [n for n in metrics or {} if volatile_metric(n)]:
                metrics.pop(name)
    return stable


def plugin_args() -> tuple[str, ...]:
    """What loads the audit's pytest plugin in a pytest subprocess: nothing where its entry point does (the package
    installed, plugin autoload on), else ``-p audit.pytest_plugin``: from a bare checkout on PYTHONPATH (the GPU
    runner's way) or with PYTEST_DISABLE_PLUGIN_AUTOLOAD, pytest would stop at --audit-registry with exit 4."""
    from importlib.metadata import entry_points

    installed = any(found.value == "audit.pytest_plugin" for found in entry_points(group="pytest11"))
    return () if installed and not os.environ.get("PYTEST_DISABLE_PLUGIN_AUTOLOAD") else ("-p", "audit.pytest_plugin")


def run_native(tmp_path, stem: str, entries: list[dict]):
    """``audit run`` (forward and gradcheck, float64 on the CPU) of a registry of ``entries`` written at the
    repository's root, where their native sources' paths start, and removed after: the command's result and the
    matrix's cells by (entry, check). The caller has changed into the root."""
    import json

    import yaml
    from click.testing import CliRunner

    from audit.cli import cli
    from tests.conftest import ROOT

    registry = ROOT / f"{stem}_{tmp_path.name}.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@native", "supports": {
        "dtypes": ["float64"], "devices": ["cpu"]}}, "entries": entries}, sort_keys=False))
    try:
        result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(tmp_path / "out"),
                                          "--check", "forward", "--check", "gradcheck", "--progress", "off"])
    finally:
        registry.unlink()
    cells = {(e["name"], c["check"]): c for e in json.loads((tmp_path / "out" / "matrix.json").read_text())["entries"]
             for c in e["cells"]}
    return result, cells

"""Without torch installed: validate works (the pre-commit hook's environment), the rest says what to install."""

from __future__ import annotations

import json
import subprocess
import sys

import yaml

from tests.helpers import ROOT
from tests.reporters.sample import matrix

NO_TORCH = "import sys; sys.modules['torch'] = None; sys.argv[0] = 'audit'; from audit.cli import main; main()"


def _audit(*args, cwd):
    return subprocess.run([sys.executable, "-c", NO_TORCH, *args], capture_output=True, text=True, cwd=cwd)


def test_validate_needs_no_torch_and_run_says_what_to_install(tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "entries": [
        {"name": "cube", "owner": "@t", "target": "m:F", "inputs": [{"shape": ["N"]}]}]}))
    valid = _audit("validate", str(registry), cwd=ROOT)
    assert valid.returncode == 0 and "valid (1 entries)" in valid.stdout, valid.stderr
    run = _audit("run", "--registry", str(registry), "--out", str(tmp_path / "out"), cwd=ROOT)
    assert run.returncode == 2 and "needs PyTorch, which is not installed here" in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "out" / "matrix.json").exists()


def test_list_and_report_need_no_torch(tmp_path):
    """The declarations (audit/catalog/checks.py) are all `audit list` and the SARIF rules read."""
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "entries": [
        {"name": "cube", "owner": "@t", "target": "m:F", "inputs": [{"shape": ["N"]}, {"shape": ["N"]}],
         "batch": "N", "supports": {"vmap": True}}]}))
    listed = _audit("list", "--registry", str(registry), cwd=ROOT)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("cube  [function] m:F  owner @t") and "vmap*" in listed.stdout
    assert "partial_grad" in listed.stdout and "shared_grad" in listed.stdout
    sample = tmp_path / "matrix.json"
    sample.write_text(json.dumps(matrix()))
    sarif = _audit("report", str(sample), "--format", "sarif", cwd=ROOT)
    assert sarif.returncode == 0 and '"rules"' in sarif.stdout and "finite differences" in sarif.stdout, sarif.stderr

"""Without torch installed: validate works (the pre-commit hook's environment), the rest says what to install."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.helpers import ROOT

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

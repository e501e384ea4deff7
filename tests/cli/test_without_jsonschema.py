"""Without jsonschema (a GPU runner used as it is): a valid registry loads exactly as with it, since the compiled
shortcut decides it alone; an invalid one is still refused (exit 2), saying what to install to learn where and why."""

from __future__ import annotations

import subprocess
import sys

import yaml

from tests.helpers import ROOT

NO_JSONSCHEMA = ("import sys; sys.modules['jsonschema'] = None; sys.argv[0] = 'audit'; from audit.cli import main; "
                 "main()")


def _audit(*args):
    return subprocess.run([sys.executable, "-c", NO_JSONSCHEMA, *args], capture_output=True, text=True, cwd=ROOT)


def test_without_jsonschema_a_valid_registry_loads_and_an_invalid_one_is_a_registry_error(tmp_path):
    entry = {"name": "cube", "owner": "@t", "target": "m:F", "inputs": [{"shape": ["N"]}]}
    valid, invalid = tmp_path / "valid.yaml", tmp_path / "invalid.yaml"
    valid.write_text(yaml.safe_dump({"version": 1, "entries": [entry]}))
    invalid.write_text(yaml.safe_dump({"version": 1, "entries": [{**entry, "bogus": 1}]}))
    listed = _audit("list", "--registry", str(valid))
    assert listed.returncode == 0 and listed.stdout.startswith("cube  [function] m:F"), listed.stderr
    refused = _audit("validate", str(invalid))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{invalid}:1:1: does not satisfy the registry schema (version 1)" in refused.stdout + refused.stderr
    assert "pip install 'jsonschema>=4.18'" in refused.stdout + refused.stderr
    assert "the audit itself failed" not in refused.stderr



def test_this_repositorys_registries_need_no_jsonschema():
    """The GPU acceptance run audits both on machines that may lack it."""
    done = _audit("validate", "registry.yaml", "bench/gpu/registry.yaml")
    assert done.returncode == 0, done.stdout + done.stderr

"""A warm pre-merge run, every cell in the result cache, never imports torch in the parent (nor does a cold one:
torch is the workers'); the environment stored
beside the cache is used only while its fingerprint holds, so a device that is gone never serves a cached cell."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.engine import environment as stored, worker
from audit.results.environment import FIELDS, Environment
from tests.helpers import ROOT

pytestmark = pytest.mark.slow

ENTRY = {"name": "cube", "target": "tests.fixtures.broken:Cube", "inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
DEFAULTS = {"owner": "@team", "supports": {"dtypes": ["float64"], "devices": ["cpu", "cuda"]}}
#: What a machine with a GPU reported when the cache was filled there.
GPU = {"torch": "2.13.0+cu124", "cuda": "12.4", "devices": ["cpu", "cuda"], "python": "3.11.7", "platform": "Linux"}
#: The parent's run, in-process: afterwards, say whether torch was imported.
WARM = ("import sys; sys.argv[0] = 'audit'; from audit.cli import main\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('torch imported:', 'torch' in sys.modules)\nsys.exit(code)")


def _args(registry, out, cache, *extra):
    return ["run", "--registry", str(registry), "--out", str(out), "--check", "forward", "--progress", "off",
            "--profile", "premerge", "--cache-dir", str(cache), *extra]


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture(scope="module")
def filled(tmp_path_factory, write_registry_module):
    """A registry (cpu and cuda cells) and a result cache filled by one cold run."""
    folder = tmp_path_factory.mktemp("warm")
    registry = write_registry_module(folder, [ENTRY], DEFAULTS)
    cold = _run(*_args(registry, folder / "out", folder / "cache"))
    assert cold.exit_code == 0 and "cache: 0 of 2 cells reused" in cold.stderr, cold.output + cold.stderr
    return registry, folder / "cache"


@pytest.fixture(scope="module")
def write_registry_module():
    import yaml

    def write(folder, entries, defaults):
        path = folder / "registry.yaml"
        path.write_text(yaml.safe_dump({"version": 1, "defaults": defaults, "entries": entries}, sort_keys=False))
        return path

    return write


def test_a_warm_run_does_not_import_torch_in_the_parent(filled, tmp_path):
    registry, cache = filled
    done = subprocess.run([sys.executable, "-c", WARM, *_args(registry, tmp_path / "out", cache)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0 and "cache: 2 of 2 cells reused" in done.stderr, done.stdout + done.stderr
    assert "torch imported: False" in done.stdout
    environment = json.loads((tmp_path / "out" / "matrix.json").read_text())["environment"]
    assert Environment.from_json({k: environment[k] for k in FIELDS}) == worker.environment()  # the truth, no torch


def test_a_cold_run_does_not_import_torch_in_the_parent_either(filled, tmp_path):
    """The workers import torch; the parent only reads what they send, which holds no torch object (the
    environment's version strings once arrived as TorchVersion, and unpickling one imported torch here, 2-3 s
    while the workers waited)."""
    registry, _ = filled
    args = ["run", "--registry", str(registry), "--out", str(tmp_path / "out"), "--check", "forward",
            "--progress", "off"]
    done = subprocess.run([sys.executable, "-c", WARM, *args], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0 and "torch imported: False" in done.stdout, done.stdout + done.stderr
    environment = json.loads((tmp_path / "out" / "matrix.json").read_text())["environment"]
    assert Environment.from_json({k: environment[k] for k in FIELDS}) == worker.environment()


def test_a_stale_environment_is_recomputed_and_a_gone_device_serves_no_cell(filled, tmp_path, monkeypatch):
    """The cache also holds a cuda cell that passed on a GPU machine (as if it were shared with one); its stored
    environment names the GPU under a fingerprint that no longer matches (the driver is gone): torch is asked,
    and the cuda cell is this machine's skip, not the GPU's pass."""
    registry, filled_cache = filled
    cache = tmp_path / "cache"
    shutil.copytree(filled_cache, cache)
    _plant_gpu_pass(registry, cache, tmp_path, monkeypatch)
    stale = {**stored.fingerprint(), "drivers": {"/proc/driver/nvidia/version": "NVRM version: 550.54.14"}}
    (cache / stored.STORE).write_text(json.dumps({"fingerprint": stale, "environment": GPU}))
    asked = []
    monkeypatch.setattr(worker, "environment", lambda real=worker.environment: asked.append(1) or real())
    warm = _run(*_args(registry, tmp_path / "out", cache))
    assert warm.exit_code == 0 and "cache: 2 of 2 cells reused" in warm.stderr, warm.output + warm.stderr
    matrix = json.loads((tmp_path / "out" / "matrix.json").read_text())
    assert asked and matrix["environment"]["devices"] == ["cpu"] and matrix["environment"]["cuda"] is None
    cuda = [c for c in matrix["entries"][0]["cells"] if c["device"] == "cuda"]
    assert [c["status"] for c in cuda] == ["skip"], cuda
    record = json.loads((cache / stored.STORE).read_text())
    assert record == {"fingerprint": stored.fingerprint(), "environment": matrix_environment(matrix)}


def matrix_environment(matrix: dict) -> dict:
    """The fields of the matrix's environment that the store holds."""
    return {k: matrix["environment"][k] for k in FIELDS}


def _plant_gpu_pass(registry, cache, tmp_path, monkeypatch) -> None:
    """Cache records keyed by the GPU environment, the cuda one a pass: what a GPU machine would have stored."""
    before = set(cache.glob("*/*.json"))
    with monkeypatch.context() as patch:
        patch.setattr(worker, "environment", lambda: Environment.from_json(GPU))
        (cache / stored.STORE).unlink()
        planted = _run(*_args(registry, tmp_path / "planted", cache, "--device", "cuda"))
    assert planted.exit_code == 0 and "1 computed" in planted.stderr, planted.output + planted.stderr
    for path in set(cache.glob("*/*.json")) - before:
        record = json.loads(path.read_text())
        record["outcome"].update(verdict="held", message="")
        path.write_text(json.dumps(record))

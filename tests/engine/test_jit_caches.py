"""Concurrent workers share no JIT cache: each worker slot has its own folders, kept between runs.

Two entries whose target module JIT-compiles the same kernel into a cache that neither locks nor writes atomically
(tests/fixtures/jit_cache.py, under ``$XDG_CACHE_HOME``) run at ``-j 2``, twice: no cell ever errors, the user's own
cache folder (``$HOME/.cache``) is never written, and the second run compiles nothing (each slot kept its build).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tests.conftest import ROOT

ENTRIES = [{"name": name, "target": f"tests.fixtures.jit_cache:{name}", "inputs": [{"shape": ["N"]}],
            "dims": {"N": [1, 4]}} for name in ("Scale", "ScaleAgain")]
DEFAULTS = {"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}}


@pytest.mark.slow
def test_two_workers_compiling_the_same_kernel_into_an_unlocked_cache_never_error(tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": DEFAULTS, "entries": ENTRIES}, sort_keys=False))
    home, log = tmp_path / "home", tmp_path / "compiles.log"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "TOYJIT_LOG": str(log)}
    env.pop("XDG_CACHE_HOME", None)
    for run in range(2):
        done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out",
                               str(tmp_path / "out"), "--check", "forward", "--check", "gradcheck", "--no-cache",
                               "--progress", "off", "--examples", "5", "-j", "2"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=600)
        matrix = json.loads((tmp_path / "out" / "matrix.json").read_text())
        statuses = {e["name"]: [(c["status"], c["message"]) for c in e["cells"]] for e in matrix["entries"]}
        assert done.returncode == 0 and all(s == "pass" for cells in statuses.values() for s, _ in cells), statuses
        user_cache = home / ".cache" / "toyjit"
        assert not user_cache.exists(), f"run {run}: the user's cache was written"
        shutil.rmtree(user_cache, ignore_errors=True)
    assert len(log.read_text().splitlines()) == 2  # once per slot, in the first run only


def test_each_slot_gets_its_own_folders_and_torch_extensions_are_shared_unless_the_user_chose(tmp_path):
    from audit.runtime.jit import root, slot_env

    folder = root(str(tmp_path), None)
    assert folder == tmp_path.resolve() / ".audit-cache" / "jit"
    zero, one = slot_env({}, folder, 0), slot_env({}, folder, 1)
    assert zero["XDG_CACHE_HOME"] == str(folder / "slot-0" / "xdg") != one["XDG_CACHE_HOME"]
    assert zero["TRITON_CACHE_DIR"] != one["TRITON_CACHE_DIR"]
    assert zero["TORCH_EXTENSIONS_DIR"] == one["TORCH_EXTENSIONS_DIR"] == str(folder / "torch_extensions")
    assert slot_env({"TORCH_EXTENSIONS_DIR": "/mine"}, folder, 0)["TORCH_EXTENSIONS_DIR"] == "/mine"

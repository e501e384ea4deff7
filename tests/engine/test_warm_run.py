"""A run the result cache serves whole imports neither torch nor a local check (which imports torch itself).

A pre-merge run with nothing changed should cost no more than reading the cache: the parent plans, keys and judges
with the built-in checks' declarations and the local checks' stored ones (audit/engine/declarations.py), and finds
every source file it fingerprints without importing its packages (a reference in ``torch.nn.functional``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

N = "tests.fixtures.patched_neighbours"
ENTRIES = [
    {"name": "softmax", "target": f"{N}:Softmax", "reference": f"{N}:by_functional", "checks": ["simplex"],
     "inputs": [{"shape": [2, "N"]}], "dims": {"N": [1, 4]}},
    {"name": "expit", "target": "tests.fixtures.scipy_expit:Expit", "reference": "torch.special:expit",
     "inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}},
]
#: Runs the audit, then says which of torch's modules this process imported.
PROBE = ("import atexit, json, sys\n"
         "atexit.register(lambda: print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'torch'))))\n"
         "sys.argv = ['audit', 'run'] + sys.argv[1:]\n"
         "from audit.cli import main\nmain()\n")


def _run(folder: Path, *args: str) -> tuple[int, list[str], str]:
    command = [sys.executable, "-c", PROBE, "--registry", str(folder / "registry.yaml"), "--out",
               str(folder / "out"), "--cache", "--cache-dir", str(folder / "cache"), "--check", "forward",
               "--check", "simplex", "--examples", "5", "--progress", "off", *args]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


@pytest.mark.slow
def test_a_run_the_cache_serves_whole_imports_neither_torch_nor_a_local_check(tmp_path):
    (tmp_path / "checks").mkdir()
    shutil.copy(ROOT / "checks" / "simplex.py", tmp_path / "checks" / "simplex.py")
    document = {"version": 1, "defaults": {"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}},
                "entries": ENTRIES}
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
    code, imported, log = _run(tmp_path)
    assert code == 0 and "torch" in imported, log  # the first run imports the local check, which imports torch
    code, imported, log = _run(tmp_path)
    assert code == 0, log
    assert "cache: 3 of 3 cells reused" in log, log
    assert imported == [], log
    changed = (tmp_path / "checks" / "simplex.py").read_text().replace("1e-12", "2e-12")
    (tmp_path / "checks" / "simplex.py").write_text(changed)  # its source changed: its declaration is stale
    code, imported, log = _run(tmp_path)
    assert code == 0 and "torch" in imported and "cache: 1 of 3 cells reused" in log, log  # all the entry's cells

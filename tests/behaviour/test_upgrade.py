"""Two environments end to end: ``audit run --record`` under the "old" and the "new" one (AUDIT_TEST_NEW_TORCH
stands for the newer torch), ``--against`` the old record, then ``audit diff`` and ``audit recheck``. Every planted
change is reported in its class with its numbers; no twin is; a record worker that dies costs only its entry."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import yaml

from tests.behaviour.records import ROOT

pytestmark = pytest.mark.slow

VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
ENTRIES = [
    {"name": "scaled", "kind": "callable", "target": "tests.fixtures.drift:scaled", **VECTOR},
    {"name": "steady", "kind": "callable", "target": "tests.fixtures.drift:steady", **VECTOR},
    {"name": "sine", "target": "tests.fixtures.drift:Sine", **VECTOR},
    {"name": "steady_sine", "target": "tests.fixtures.drift:SteadySine", **VECTOR},
    {"name": "breaking", "kind": "callable", "target": "tests.fixtures.drift:breaking", **VECTOR,
     "supports": {"compile": True}},
    {"name": "unbroken", "kind": "callable", "target": "tests.fixtures.drift:unbroken", **VECTOR,
     "supports": {"compile": True}},
    {"name": "sleepy", "kind": "callable", "target": "tests.fixtures.drift:sleepy", **VECTOR},
    {"name": "renamed", "kind": "module", "target": "tests.fixtures.drift:renamed", "inputs": [{"shape": ["B", 4]}]},
    {"name": "linear", "kind": "module", "target": "tests.fixtures.drift:linear", "inputs": [{"shape": ["B", 4]}]},
    {"name": "drifting_model", "kind": "model", "target": "tests.fixtures.drift:drifting_model"},
    {"name": "steady_model", "kind": "model", "target": "tests.fixtures.drift:steady_model"},
    {"name": "crashing", "kind": "callable", "target": "tests.fixtures.drift:crashing", **VECTOR},
]
TWINS = {"steady", "steady_sine", "unbroken", "linear", "steady_model"}


def _audit(*args, new: bool, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "AUDIT_TEST_NEW_TORCH": "1" if new else "0", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "audit", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("upgrade")
    (folder / "registry.yaml").write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@tests"},
                                                          "entries": ENTRIES}, sort_keys=False))
    common = ["run", "--record", "--check", "forward", "--check", "compile", "--progress", "off", "-q"]
    old = _audit(*common, "--out", "old", new=False, cwd=folder)
    assert old.returncode == 0, old.stdout + old.stderr
    new = _audit(*common, "--out", "new", "-j", "2", "--against", "old", new=True, cwd=folder)
    assert new.returncode == 1, new.stdout + new.stderr  # the crashing entry's own cells are errors
    diff = _audit("diff", "old/matrix.json", "new/matrix.json", "--format", "json", new=True, cwd=folder)
    return folder, diff


def test_the_diff_gates_and_names_each_planted_change_in_its_class(runs):
    _, diff = runs
    assert diff.returncode == 1, diff.stderr
    changes = json.loads(diff.stdout)["behaviour"]["changes"]
    entries = {kind: {c["entry"] for c in found} for kind, found in changes.items()}
    assert {"scaled", "sine", "drifting_model"} <= entries["values"]
    assert entries["training"] == {"drifting_model"}
    assert entries["checkpoint"] == {"renamed"}
    assert {"breaking", "sleepy"} == entries["compile"]  # sleepy's time.sleep breaks the graph too
    assert "sleepy" in entries["cost"]
    assert not TWINS & (entries["values"] | entries["training"] | entries["checkpoint"] | entries["compile"]
                        | entries["cost"])
    (cost,) = [c for c in changes["cost"] if c["entry"] == "sleepy" and c["what"].startswith("float64")]
    assert "slower" in cost["detail"] and not cost["gates"]


def test_a_dead_record_worker_costs_only_its_entry(runs):
    folder, _ = runs
    manifest = json.loads((folder / "new" / "behaviour" / "manifest.json").read_text())
    errors = {e["name"]: e["error"] for e in manifest["entries"] if e["error"]}
    assert list(errors) == ["crashing"] and "exited with code 7" in errors["crashing"]
    assert len(manifest["entries"]) == len(ENTRIES)


def test_recheck_replays_a_change_in_the_new_environment_and_passes_in_the_old(runs):
    folder, _ = runs
    moved = _audit("recheck", "sine", "--against", "old", "--dtype", "float64", new=True, cwd=folder)
    assert moved.returncode == 1 and "gradient of input 0" in moved.stdout, moved.stdout + moved.stderr
    held = _audit("recheck", "sine", "--against", "old", new=False, cwd=folder)
    assert held.returncode == 0, held.stdout + held.stderr


def test_a_record_that_hangs_costs_its_entry_only_after_timeout(tmp_path):
    entries = [{"name": "steady", "kind": "callable", "target": "tests.fixtures.drift:steady", **VECTOR},
               {"name": "hangs", "kind": "callable", "target": "tests.fixtures.drift:hangs_when_recorded", **VECTOR},
               {"name": "after", "kind": "callable", "target": "tests.fixtures.drift:steady", **VECTOR}]
    (tmp_path / "registry.yaml").write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@tests"},
                                                            "entries": entries}, sort_keys=False))
    done = _audit("run", "--record", "--check", "forward", "--timeout", "5", "--progress", "off", "-q", "--out",
                  "out", new=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((tmp_path / "out" / "behaviour" / "manifest.json").read_text())
    errors = {e["name"]: e["error"] for e in manifest["entries"]}
    assert errors == {"steady": "", "hangs": "timed out: its record took more than --timeout 5 s", "after": ""}

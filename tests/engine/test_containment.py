"""A target that crashes, hangs, exits or eats memory becomes error cells; its neighbours survive."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from audit.cli import cli

H = "tests.fixtures.hostile"
pytestmark = pytest.mark.slow


def _entry(name, target):
    return {"name": name, "target": target, "inputs": [{"shape": ["N"]}]}


def test_hostile_targets_are_contained(write_registry, tmp_path):
    registry = write_registry(
        [_entry("before", "tests.fixtures.broken:Cube"), _entry("segv", f"{H}:Segfault"), _entry("hang", f"{H}:Hang"),
         _entry("exit", f"{H}:Exit"), _entry("hardexit", f"{H}:HardExit"), _entry("hog", f"{H}:Hog"),
         _entry("missing", "no_such_module:F"), _entry("after", "tests.fixtures.broken:Cube")],
        defaults={"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}})
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--check", "forward",
                                      "--check", "gradcheck", "--timeout", "3", "--max-memory", "512M", "-j", "2",
                                      "--progress", "off"], catch_exceptions=False)
    assert result.exit_code == 1
    matrix = json.loads((out / "matrix.json").read_text())
    cells = {e["name"]: e["cells"] for e in matrix["entries"]}
    assert list(cells) == ["before", "segv", "hang", "exit", "hardexit", "hog", "missing", "after"]
    for name in ("before", "after"):
        assert [c["status"] for c in cells[name]] == ["pass", "pass"]
    expected = {"segv": "was killed by SIGSEGV during forward (float64, cpu) on example",
                "hang": "timed out after 3 s during forward (float64, cpu)",
                "exit": "the target called sys.exit(3)",
                "hardexit": "exited with code 7 during forward",
                "hog": "out of memory: over the worker's cap of 512 MiB",
                "missing": "target could not be loaded: cannot import module 'no_such_module'"}
    for name, words in expected.items():
        assert [c["status"] for c in cells[name]] == ["error", "error"], name
        assert words in cells[name][0]["message"], cells[name][0]["message"]
    assert matrix["verdict"] == "fail" and matrix["summary"]["error"] == 12


def _run(registry, out, *args):
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "-j", "1",
                                      "--progress", "off", *args], catch_exceptions=False)
    matrix = json.loads((out / "matrix.json").read_text())
    return result, {e["name"]: e["cells"] for e in matrix["entries"]}


def test_timeout_is_per_check_and_start_up_has_its_own_budget(write_registry, tmp_path):
    """A worker whose start-up (here: a target module that takes 5 s to import) takes longer than --timeout
    still runs a fast check; a check that hangs is still timed out, during that check."""
    (tmp_path / "slow_start.py").write_text("import time\n\ntime.sleep(5)\n")
    registry = write_registry([{**_entry("slow", "tests.fixtures.broken:Cube"), "load": ["slow_start"]},
                               _entry("hang", f"{H}:Hang")],
                              defaults={"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}})
    result, cells = _run(registry, tmp_path / "out", "--check", "forward", "--timeout", "2")
    assert cells["slow"][0]["status"] == "pass", cells["slow"][0]["message"]
    assert cells["hang"][0]["status"] == "error"
    assert "timed out after 2 s during forward (float64, cpu)" in cells["hang"][0]["message"]
    assert cells["hang"][0]["kind"] == "error: timed out" and "kind" not in cells["slow"][0]
    assert result.exit_code == 1


def test_an_unclaimed_probe_that_hangs_has_a_short_budget_and_does_not_gate(write_registry, tmp_path):
    """float16 is not claimed: its probe hanging is an error cell on the probe's own budget, and the gate
    passes on the claimed cells."""
    entry = {**_entry("iterative", "tests.fixtures.global_state:HangsInHalf"),
             "supports": {"dtypes": ["float64", "float32"], "devices": ["cpu"]}}
    registry = write_registry([entry], defaults={"owner": "@t"})
    result, cells = _run(registry, tmp_path / "out", "--check", "dtype", "--timeout", "120",
                         "--unclaimed-timeout", "2")
    by_dtype = {c["dtype"]: c for c in cells["iterative"]}
    assert {d: c["status"] for d, c in by_dtype.items()} == {"float64": "pass", "float32": "pass",
                                                              "float16": "error", "bfloat16": "xpass"}
    message = by_dtype["float16"]["message"]
    assert "timed out after 2 s during dtype (float16, cpu)" in message and "unclaimed probe" in message
    assert result.exit_code == 0, result.output


LOCAL_CHECKS = '''\
import time

from audit.catalog.interface import Check
from audit.runtime.startup import starting


def warm(subject, case):
    if not subject.state:
        with starting("warming a cache"):
            time.sleep(4)
        subject.state["warm"] = True


def warm_then_hang(subject, case):
    with starting("warming a cache"):
        time.sleep(0.1)
    while True:
        time.sleep(0.05)


CHECK = Check(name="{name}", contract="start-up work, then the check", run={name})
'''


def test_start_up_work_inside_a_check_is_not_on_the_checks_clock(write_registry, tmp_path):
    """Start-up work in a cell (the distributed check starting its ranks) is timed on the start-up budget:
    4 s of it pass under --timeout 2; the check's own clock then goes on, and a hang is still caught."""
    (tmp_path / "checks").mkdir()
    for name in ("warm", "warm_then_hang"):
        (tmp_path / "checks" / f"{name}.py").write_text(LOCAL_CHECKS.replace("{name}", name))
    registry = write_registry([{**_entry("cube", "tests.fixtures.broken:Cube"), "checks": ["warm", "warm_then_hang"]}],
                              defaults={"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}})
    result, cells = _run(registry, tmp_path / "out", "--check", "warm", "--check", "warm_then_hang",
                         "--timeout", "2", "--examples", "2")
    by_check = {c["check"]: c for c in cells["cube"]}
    assert by_check["warm"]["status"] == "pass", by_check["warm"]["message"]
    hang = by_check["warm_then_hang"]
    assert hang["status"] == "error" and hang["message"].startswith("timed out after 2 s during warm_then_hang")
    assert "start-up" not in hang["message"] and result.exit_code == 1

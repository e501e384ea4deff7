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

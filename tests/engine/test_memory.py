"""The memory cap holds where the kernel does not enforce an address-space limit (macOS): a watchdog."""

from __future__ import annotations

import json
import subprocess
import sys

from click.testing import CliRunner

from audit.cli import cli
from audit.engine import memory
from tests.helpers import ROOT

ALLOCATE = """
from audit.engine import memory
import torch
memory.cap({limit}, "watchdog")
blocks = [torch.ones(1 << 25, dtype=torch.float64) for _ in range(16)]  # 256 MiB each, 4 GiB in all
print("allocated past the cap")
"""


def test_the_watchdog_ends_a_process_past_its_cap_with_its_own_exit_code():
    done = subprocess.run([sys.executable, "-c", ALLOCATE.format(limit=256 << 20)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert done.returncode == memory.EXIT_OUT_OF_MEMORY, done.stdout + done.stderr
    assert "passed the worker's cap of 256 MiB" in done.stderr and "allocated" not in done.stdout


def test_linux_uses_the_address_space_limit_and_no_cap_means_none():
    if sys.platform.startswith("linux"):
        assert memory.default_method() == "address-space"
    assert memory.cap(0) == "none"


def test_a_target_past_the_cap_is_an_error_cell_under_the_watchdog(write_registry, tmp_path, monkeypatch):
    """As on macOS: the worker ends, the cell says out of memory, the next entry still runs."""
    monkeypatch.setenv("AUTOGRAD_AUDIT_MEMORY_CAP", "watchdog")
    registry = write_registry(
        [{"name": "hog", "target": "tests.fixtures.hostile:Hog", "inputs": [{"shape": ["N"]}]},
         {"name": "after", "target": "tests.fixtures.broken:Cube", "inputs": [{"shape": ["N"]}]}],
        defaults={"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}})
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--check", "forward",
                                      "--max-memory", "512M", "-j", "1", "--progress", "off"], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    cells = {e["name"]: e["cells"] for e in json.loads((out / "matrix.json").read_text())["entries"]}
    assert cells["hog"][0]["status"] == "error"
    assert "out of memory: over the worker's cap of 512 MiB (resident memory" in cells["hog"][0]["message"]
    assert cells["after"][0]["status"] == "pass"

"""This repository's own registry audits green: the README's first command must pass."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.results.changes import diff
from audit.results.matrix import Matrix
from tests.conftest import ROOT

pytestmark = pytest.mark.slow


def test_own_registry_is_green(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["run", "--out", str(tmp_path), "--progress", "off", "-j", "2"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    matrix = json.loads((tmp_path / "matrix.json").read_text())
    cpu = [c for e in matrix["entries"] for c in e["cells"] if c["device"] == "cpu"]
    assert matrix["verdict"] == "pass"
    assert {c["status"] for c in cpu} <= {"pass", "unsupported", "xpass", "skip"}  # xpass: a low-precision probe held
    assert all(c["status"] == "pass" for c in cpu if c["claimed"])
    # The CPU skips allowed: PyTorch's own bug (torch.func on a register_autograd custom op), named as such, and
    # the two checks that do not apply to a complex entry (autocast casts only real tensors; the DDP harness
    # uses a real loss), each saying why.
    not_for_complex = {("complex_filter", "autocast"), ("complex_filter", "distributed")}
    skips = [(e["name"], c) for e in matrix["entries"] for c in e["cells"]
             if c["device"] == "cpu" and c["status"] == "skip"]
    assert all(c["message"].startswith("PyTorch bug") or (name, c["check"]) in not_for_complex for name, c in skips)
    assert {(name, c["check"]) for name, c in skips if not c["message"].startswith("PyTorch bug")} == not_for_complex
    simplex = [c for e in matrix["entries"] for c in e["cells"] if c["check"] == "simplex"]
    assert simplex and all(c["status"] == "pass" for c in simplex if c["device"] == "cpu")
    # The committed baseline is this matrix: refresh it (docs/ci.md, The baseline) when a status legitimately changes.
    baseline = Matrix.from_json(json.loads((ROOT / "reports" / "baseline.json").read_text()))
    drift = diff(baseline, Matrix.from_json(matrix))
    assert not drift.changes, [f"{c.where}: {c.old} -> {c.new}" for c in drift.changes]
    assert not (drift.cells_added or drift.cells_removed or drift.entries_added or drift.entries_removed)

"""The command line end to end through click's CliRunner: exit codes, files, selection, replay."""

from __future__ import annotations

import json
import re
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from audit.cli import cli
from tests.helpers import matrix_without_timings

F = "tests.fixtures.broken"
DEFAULTS = {"owner": "@ml-kernels", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}}
CUBE = {"name": "cube", "target": f"{F}:Cube", "reference": f"{F}:cube_reference",
        "inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
BROKEN = {**CUBE, "name": "broken", "target": f"{F}:WrongSign"}
pytestmark = pytest.mark.slow


def _run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_green_registry_exits_0_and_writes_every_file(write_registry, tmp_path):
    registry = write_registry([CUBE], defaults=DEFAULTS)
    out = tmp_path / "out"
    result = _run("run", "--registry", str(registry), "--out", str(out), "--check", "gradcheck", "--progress", "off")
    assert result.exit_code == 0, result.output
    matrix = json.loads((out / "matrix.json").read_text())
    assert matrix["schema"] == "audit-matrix/1" and matrix["verdict"] == "pass"
    assert matrix["summary"]["pass"] == 1 and matrix["environment"]["seed"] == 0
    assert matrix["environment"]["torch"] and len(matrix["environment"]["registry_sha256"]) == 64
    (entry,) = matrix["entries"]
    assert entry["owner"] == ["@ml-kernels"] and len(entry["digest"]) == 64
    assert [c["check"] for c in entry["cells"]] == ["gradcheck"]
    assert "| cube |" in (out / "matrix.md").read_text()
    assert not list(out.glob(".*.tmp"))


def test_planted_bug_exits_1_with_a_message_that_points_at_it(write_registry, tmp_path):
    registry = write_registry([CUBE, BROKEN], defaults=DEFAULTS)
    out = tmp_path / "out"
    result = _run("run", "--registry", str(registry), "--out", str(out), "--check", "gradcheck",
                  "--check", "forward", "--progress", "off")
    assert result.exit_code == 1
    line = next(ln.strip() for ln in result.output.splitlines()  # each failing cell, under its cause
                if re.match(rf"\s*{re.escape(str(registry))}:\d+: broken gradcheck FAIL", ln))
    assert "(float64, cpu)" in line and "owner @ml-kernels" in line and "max |analytic - numeric|" in line
    assert "repro: audit repro broken gradcheck --dtype float64 --device cpu --seed 0 --registry" in line
    scripts = list((out / "repro").glob("broken__gradcheck__*.py"))
    assert len(scripts) == 1
    replay = subprocess.run([sys.executable, str(scripts[0])], capture_output=True, text=True,
                            env={**os.environ, "PYTHONPATH": os.environ["PYTHONPATH"]})
    assert replay.returncode == 1 and "Jacobian mismatch" in replay.stdout, replay.stdout + replay.stderr
    repro = _run("repro", "broken", "gradcheck", "--registry", str(registry), "--matrix", str(out / "matrix.json"))
    assert repro.exit_code == 1 and "FAIL: Jacobian mismatch" in repro.output
    assert "strides [1]" in repro.output or "strides [" in repro.output


def test_quiet_run_prints_only_the_failing_cells_and_the_verdict(write_registry, tmp_path):
    """-q: no progress line, no matrix; each failing cell's line under its cause, then the verdict."""
    registry = write_registry([CUBE, BROKEN], defaults=DEFAULTS)
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out",
                           str(tmp_path / "out"), "--check", "gradcheck", "-q"], capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr == "", done.stderr  # no "[1/2] cube: 1 pass" line
    lines = done.stdout.splitlines()
    cells = [ln.strip() for ln in lines if ln.startswith(" ") and f"{registry}:" in ln]
    assert [ln.split(": ")[1] for ln in cells] == ["broken gradcheck FAIL (float64, cpu)"], lines
    assert lines[0] == "Failures of claimed cells: 1 cause, 1 owner" and lines[1].startswith("[1] gradcheck: "), lines
    assert not any("│" in ln or "cube" in ln for ln in lines), lines  # no matrix, no passing entry
    assert lines[-1] == "autograd-audit: FAIL: 1 pass, 1 fail (claimed)"


def test_same_seed_gives_the_same_matrix(write_registry, tmp_path):
    model = {"name": "net", "kind": "model", "target": "examples.models:build", "training": {"steps": 2}}
    registry = write_registry([CUBE, BROKEN, model], defaults=DEFAULTS)
    texts = []
    for name in ("a", "b"):
        _run("run", "--registry", str(registry), "--out", str(tmp_path / name), "--check", "gradcheck",
             "--check", "determinism", "--check", "vmap", "--check", "compile", "--check", "train_step",
             "--progress", "off", "-j", "2")
        raw = (tmp_path / name / "matrix.json").read_text()
        assert "peak_rss_mb" in raw and "step_seconds" in raw and "compile_seconds" in raw  # volatile, present
        texts.append(matrix_without_timings(raw))
    assert texts[0] == texts[1]
    assert any(c.get("metrics", {}).get("graphs") for e in texts[0]["entries"] for c in e["cells"])
    assert any(c.get("metrics", {}).get("losses") for e in texts[0]["entries"] for c in e["cells"])


def test_select_and_check_limit_the_cells(write_registry, tmp_path):
    registry = write_registry([CUBE, BROKEN], defaults=DEFAULTS)
    out = tmp_path / "out"
    result = _run("run", "--registry", str(registry), "--out", str(out), "--select", "cu*", "--check", "forward",
                  "--progress", "off")
    assert result.exit_code == 0
    matrix = json.loads((out / "matrix.json").read_text())
    assert [e["name"] for e in matrix["entries"]] == ["cube"]
    assert {c["check"] for c in matrix["entries"][0]["cells"]} == {"forward"}


@pytest.mark.parametrize("args, words", [
    (["--select", "nothing*"], "matches no entry"),
    (["--check", "gradchek"], "unknown check gradchek"),
    (["--max-memory", "lots"], "expected a size"),
])
def test_usage_errors_exit_2(write_registry, tmp_path, args, words):
    registry = write_registry([CUBE], defaults=DEFAULTS)
    result = _run("run", "--registry", str(registry), "--out", str(tmp_path / "out"), *args)
    assert result.exit_code == 2 and words in result.output
    assert not (tmp_path / "out").exists()


def test_broken_registry_exits_2_with_a_precise_message_and_writes_nothing(tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_text("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n"
                        "    inputs: [{shape: [1]}]\n    supports: {vmapp: true}\n")
    for command in (["run", "--registry", str(registry), "--out", str(tmp_path / "out")],
                    ["validate", str(registry)]):
        result = _run(*command)
        assert result.exit_code == 2
        assert f"{registry}:7:16: entries[0].supports.vmapp: unknown key" in result.output
    assert not (tmp_path / "out").exists()


def test_validate_and_list(write_registry):
    registry = write_registry([CUBE, BROKEN], defaults=DEFAULTS)
    assert _run("validate", str(registry)).exit_code == 0
    listing = _run("list", "--registry", str(registry))
    assert listing.exit_code == 0 and "cube  [function]" in listing.output and "gradcheck*" in listing.output


def test_local_check_name_must_exist(write_registry, tmp_path):
    registry = write_registry([{**CUBE, "checks": ["no_such_check"]}], defaults=DEFAULTS)
    result = _run("run", "--registry", str(registry), "--out", str(tmp_path / "out"))
    assert result.exit_code == 2 and "no check named 'no_such_check'" in result.output

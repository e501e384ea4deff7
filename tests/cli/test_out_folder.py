"""One writer per --out, and only this run's replay scripts in it."""

from __future__ import annotations

import fcntl
import os

from click.testing import CliRunner

from audit.cli import cli

B = "tests.fixtures.broken"


def _registry(write_registry, target):
    return write_registry([{"name": "subject", "owner": "@t", "target": f"{B}:{target}", "inputs": [{"shape": ["N"]}],
                            "reference": f"{B}:cube_reference", "supports": {"dtypes": ["float64"]}}])


def _run(registry, out):
    return CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--check", "gradcheck",
                                    "--progress", "off", "-j", "1"])


def test_a_second_run_into_the_same_out_is_refused(write_registry, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # as a first run holds it
    try:
        result = _run(_registry(write_registry, "Cube"), out)
    finally:
        os.close(fd)
    assert result.exit_code == 2 and f"another audit is writing to {out}" in result.output
    assert not any(out.iterdir())


def test_a_rerun_leaves_only_its_own_replay_scripts_and_nothing_outside_out(write_registry, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    red = _run(_registry(write_registry, "WrongSign"), out)
    assert red.exit_code == 1 and [p.name for p in (out / "repro").iterdir()] == [
        "subject__gradcheck__float64__cpu.py"]
    green = _run(_registry(write_registry, "Cube"), out)
    assert green.exit_code == 0 and not list((out / "repro").iterdir())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "registry.yaml"]  # no .hypothesis/ here

"""The audit's own failures: a bug exits 2 with one line and a crash log; an unwritable --out exits 2."""

from __future__ import annotations

from click.testing import CliRunner

from audit.cli import cli


def test_an_unexpected_exception_exits_2_with_one_line_and_a_crash_log(tmp_path, monkeypatch):
    def broken(path):
        raise RuntimeError("something inside the audit broke\nsecond line")

    monkeypatch.setattr("audit.commands.validate.load_registry", broken)
    log = tmp_path / "crash.log"
    result = CliRunner(env={"AUDIT_CRASH_LOG": str(log)}).invoke(cli, ["validate", "registry.yaml"])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: the audit itself failed (RuntimeError: something inside the audit broke); the traceback and the "
        f"environment are in {log}; please report it"]
    text = log.read_text()
    assert "Traceback" in text and "second line" in text and "torch:" in text and "command:" in text


def test_an_unwritable_out_exits_2_after_the_report(write_registry, tmp_path):
    registry = write_registry([{"name": "cube", "owner": "@t", "target": "tests.fixtures.broken:Cube",
                                "inputs": [{"shape": ["N"]}], "supports": {"dtypes": ["float64"]}}])
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(blocker / "out"),
                                      "--check", "forward", "--progress", "off", "-j", "1"])
    assert result.exit_code == 2, result.output
    assert "autograd-audit: PASS" in result.output  # the verdict still reached the terminal
    assert f"error: cannot write {blocker / 'out'}" in result.output and "Not a directory" in result.output

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


def _registry(write_registry):
    return write_registry([{"name": "cube", "owner": "@t", "target": "tests.fixtures.broken:Cube",
                            "inputs": [{"shape": ["N"]}], "supports": {"dtypes": ["float64"]}}])


def _run(registry, out):
    return CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--check", "forward",
                                    "--progress", "off", "-j", "1"])


def test_an_out_that_cannot_be_made_is_refused_before_the_run(write_registry, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = _run(_registry(write_registry), blocker / "out")
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: cannot write {blocker / 'out'}: Not a directory"


def test_a_disk_that_fills_while_writing_exits_2_after_the_report(write_registry, tmp_path, monkeypatch):
    import errno
    import os

    real = os.replace

    def full(src, dst):
        if str(dst).endswith("matrix.md"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(src, dst)

    monkeypatch.setattr("audit.core.io.os.replace", full)
    result = _run(_registry(write_registry), tmp_path / "out")
    assert result.exit_code == 2, result.output
    assert "autograd-audit: PASS" in result.output  # the verdict still reached the terminal
    assert f"error: cannot write {tmp_path / 'out' / 'matrix.md'}: No space left on device" in result.output
    assert not (tmp_path / "out" / "matrix.json").exists()  # written last: never beside a missing report
    assert not list((tmp_path / "out").glob(".*.tmp"))

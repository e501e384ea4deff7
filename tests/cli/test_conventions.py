"""The conventions users bring from other CLIs: format spellings, NO_COLOR and FORCE_COLOR, JSON on stdout."""

from __future__ import annotations

import io
import json

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.app.console import color
from tests.reporters.sample import matrix


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("env, tty, expected", [({}, True, True), ({}, False, False), ({"NO_COLOR": "1"}, True, False),
                                                ({"FORCE_COLOR": "1"}, False, True),
                                                ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False)])
def test_color_follows_no_color_and_force_color(monkeypatch, env, tty, expected):
    for name in ("NO_COLOR", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert color(_Tty() if tty else io.StringIO()) is expected


def test_force_color_colours_a_report_that_is_not_on_a_terminal(tmp_path):
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix()))
    plain = CliRunner(env={"NO_COLOR": None, "FORCE_COLOR": None}).invoke(cli, ["report", str(path)])
    forced = CliRunner(env={"FORCE_COLOR": "1", "NO_COLOR": None}).invoke(cli, ["report", str(path)])
    assert "\x1b[" not in plain.output and "\x1b[" in forced.output


@pytest.mark.parametrize("spelling", ["md", "markdown"])
def test_markdown_is_md_and_markdown_in_report_and_diff(tmp_path, spelling):
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix()))
    report = CliRunner().invoke(cli, ["report", str(path), "--format", spelling])
    diff = CliRunner().invoke(cli, ["diff", str(path), str(path), "--format", spelling])
    assert report.exit_code == 0 and report.output.startswith("# ")
    assert diff.exit_code == 0 and "#" in diff.output


def test_run_prints_the_matrix_as_json_on_stdout(write_registry, tmp_path):
    registry = write_registry([{"name": "cube", "owner": "@t", "target": "tests.fixtures.broken:Cube",
                                "inputs": [{"shape": ["N"]}], "supports": {"dtypes": ["float64"]}}])
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(tmp_path / "out"), "--check",
                                      "forward", "--progress", "off", "--format", "json", "-j", "1"])
    assert result.exit_code == 0
    printed = json.loads(result.stdout)
    assert printed == json.loads((tmp_path / "out" / "matrix.json").read_text())


def test_the_matrix_names_the_registry_relative_to_the_repository_root(tmp_path, monkeypatch):
    from audit.results.matrix import repository_path

    nested = tmp_path / "repo" / "ops" / "registry.yaml"
    nested.parent.mkdir(parents=True)
    nested.write_text("")
    monkeypatch.setenv("GITHUB_WORKSPACE", str(tmp_path / "repo"))
    assert repository_path(str(nested)) == "ops/registry.yaml"
    monkeypatch.chdir(nested.parent)
    assert repository_path("registry.yaml") == "ops/registry.yaml"
    assert repository_path("../ops/registry.yaml") == "ops/registry.yaml"
    monkeypatch.delenv("GITHUB_WORKSPACE")
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    assert repository_path(str(nested)) == "ops/registry.yaml"  # git's top level
    outside = tmp_path / "elsewhere.yaml"
    assert repository_path(str(outside)) == outside.as_posix()


def test_the_progress_bar_advances_per_cell_and_names_the_check(tmp_path):
    from audit.engine.runner import Event
    from audit.app.progress import BarProgress
    from tests.helpers import entry as make_entry

    class Cell:
        check = "gradcheck"

    bar = BarProgress()
    subject = make_entry(tmp_path, target="m:F", inputs=[{"shape": ["N"]}])
    with bar:
        bar(Event("entry_start", subject, total=1, cells_total=4))
        bar(Event("cell", subject, cell=Cell(), total=1, cells_done=1, cells_total=4))
        task = bar.progress.tasks[0]
        assert task.total == 4 and task.completed == 1 and task.description == "auditing subject · gradcheck"


def test_quiet_and_verbose(tmp_path):
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix()))
    plain = CliRunner().invoke(cli, ["report", str(path)]).output
    quiet = CliRunner().invoke(cli, ["report", str(path), "-q"]).output
    verbose = CliRunner().invoke(cli, ["report", str(path), "-v"]).output
    assert "validation matrix" in plain and "validation matrix" not in quiet
    assert quiet.splitlines()[-1] == plain.splitlines()[-1] and "cube gradcheck FAIL" in quiet
    assert "cube vmap UNSUPPORTED" in verbose and "cube vmap UNSUPPORTED" not in plain

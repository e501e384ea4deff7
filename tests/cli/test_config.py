"""[tool.autograd-audit] in pyproject.toml: found from a subfolder; the command line wins over it."""

from __future__ import annotations

import json

import yaml
from click.testing import CliRunner

from audit.cli import cli

ENTRY = {"name": "cube", "owner": "@t", "target": "tests.fixtures.broken:Cube", "inputs": [{"shape": ["N"]}],
         "supports": {"dtypes": ["float64"]}}


def _project(tmp_path, settings: str):
    (tmp_path / "ops").mkdir()
    (tmp_path / "ops" / "registry.yaml").write_text(yaml.safe_dump({"version": 1, "entries": [ENTRY]}))
    (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\n\n[tool.autograd-audit]\n{settings}')
    deeper = tmp_path / "src" / "pkg"
    deeper.mkdir(parents=True)
    return deeper


def _examples(path) -> int:
    return json.loads(path.read_text())["entries"][0]["cells"][0]["examples"]


def test_settings_are_found_from_a_subfolder_and_the_command_line_wins(tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, 'registry = "ops/registry.yaml"\nout = "build/audit"\nexamples = 3\n'
                                         'progress = "off"\nprofile = "premerge"\ncache = false\n'))
    run = ["run", "--check", "forward", "-j", "1"]
    assert CliRunner().invoke(cli, run).exit_code == 0
    assert _examples(tmp_path / "build" / "audit" / "matrix.json") == 3  # the file's 3 beats premerge's 10
    assert CliRunner().invoke(cli, [*run, "--examples", "4", "--out", str(tmp_path / "flag")]).exit_code == 0
    assert _examples(tmp_path / "flag" / "matrix.json") == 4
    listed = CliRunner().invoke(cli, ["list"])
    assert listed.exit_code == 0 and listed.output.startswith("cube  [function]")


def test_an_unknown_setting_is_a_usage_error_naming_the_file(tmp_path, monkeypatch):
    monkeypatch.chdir(_project(tmp_path, "jbos = 2\n"))
    result = CliRunner().invoke(cli, ["list"])
    assert result.exit_code == 2
    assert f"{tmp_path / 'pyproject.toml'}: [tool.autograd-audit] unknown key 'jbos'" in result.output


def test_default_paths_are_the_projects_not_the_subfolders(tmp_path, monkeypatch):
    """Without registry/out in the file, `audit list` and `audit run` from a subfolder still use the root's."""
    deeper = _project(tmp_path, "examples = 2\n")
    (tmp_path / "ops" / "registry.yaml").rename(tmp_path / "registry.yaml")
    monkeypatch.chdir(deeper)
    listed = CliRunner().invoke(cli, ["list"])
    assert listed.exit_code == 0 and listed.output.startswith("cube  [function]"), listed.output
    assert CliRunner().invoke(cli, ["run", "--check", "forward", "-j", "1", "--progress", "off"]).exit_code == 0
    assert _examples(tmp_path / "reports" / "matrix.json") == 2 and not (deeper / "reports").exists()

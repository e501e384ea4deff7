"""``audit report``: any format re-rendered from a saved matrix; ``--format json`` gives the file back as it was."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from audit.cli import cli
from tests.reporters.sample import matrix


@pytest.mark.parametrize("fmt, words", [("html", "<!DOCTYPE html>"), ("md", "# autograd-audit: FAIL"),
                                        ("junit", "<testsuites"), ("json", '"schema": "audit-matrix/1"'),
                                        ("github", "::error file=registry.yaml,line=9"), ("text", "validation matrix")])
def test_report_renders_every_format_from_a_saved_matrix(tmp_path, fmt, words):
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(matrix()))
    result = CliRunner().invoke(cli, ["report", str(path), "--format", fmt])
    assert result.exit_code == 0 and words in result.output
    grouped = CliRunner().invoke(cli, ["report", str(path), "--format", "md", "--by-owner", "--out",
                                       str(tmp_path / "by_owner.md")])
    assert grouped.exit_code == 0 and "## @speech" in (tmp_path / "by_owner.md").read_text()


def test_report_as_json_writes_the_saved_matrix_back_unchanged(tmp_path):
    data = matrix()
    data["entries"][0]["cells"][0]["x-ticket"] = "#42"  # a key this version does not know survives too
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    result = CliRunner().invoke(cli, ["report", str(path), "--format", "json"])
    assert result.exit_code == 0 and result.output == path.read_text()

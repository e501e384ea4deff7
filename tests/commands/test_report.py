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


@pytest.mark.parametrize("fmt", ["text", "md", "html"])
def test_report_owner_shows_that_owners_causes_first(tmp_path, fmt):
    """In many() every cause but one is everyone's: the one cause of a single owner comes first for that owner."""
    from tests.reporters.sample import many

    data = many()
    solo, *others = data["entries"]
    solo["owner"], solo["cells"] = ["@solo"], [c for c in solo["cells"] if c["check"] == "compile"]
    for entry in others:
        entry["cells"] = [c for c in entry["cells"] if c["check"] != "compile"]
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(data))
    plain = CliRunner().invoke(cli, ["report", str(path), "--format", fmt])
    mine = CliRunner().invoke(cli, ["report", str(path), "--format", fmt, "--owner", "@solo"])
    assert plain.exit_code == mine.exit_code == 0
    compile_first = mine.output.index("compile: raised RuntimeError")
    assert plain.output.index("compile: raised RuntimeError") > plain.output.index("forward: output #")
    assert compile_first < mine.output.index("gradcheck: gradient of input #")


def test_the_reports_a_run_writes_put_its_owners_causes_first(tmp_path):
    """audit run --owner: the files it writes beside the matrix order causes as audit report --owner does."""
    from audit.app.publish import write_all
    from tests.reporters.sample import many, typed

    data = many()
    solo, *others = data["entries"]
    solo["owner"], solo["cells"] = ["@solo"], [c for c in solo["cells"] if c["check"] == "compile"]
    for entry in others:
        entry["cells"] = [c for c in entry["cells"] if c["check"] != "compile"]
    for owner, folder in ((None, tmp_path / "plain"), ("@solo", tmp_path / "mine")):
        folder.mkdir()
        write_all(folder, typed(data), owner)
    for name in ("matrix.md", "matrix.html"):
        plain, mine = ((tmp_path / f / name).read_text() for f in ("plain", "mine"))
        assert plain.index("compile: raised RuntimeError") > plain.index("forward: output #"), name
        assert mine.index("compile: raised RuntimeError") < mine.index("forward: output #"), name
    assert "--owner" in CliRunner().invoke(cli, ["run", "--help"]).output

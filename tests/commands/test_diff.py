"""audit diff on constructed matrices: every change class, code versus environment, the exit code."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.reporters.changes import render_markdown, render_text
from audit.results.changes import classify, diff as diff_matrices
from audit.results.matrix import Matrix

ENV = {"torch": "2.12.0", "python": "3.11.7", "cuda": None, "devices": ["cpu"], "platform": "linux",
       "examples": 20, "compile_backend": "aot_eager", "seed": 0, "git_commit": "a", "registry_sha256": "r"}


def diff(old: dict, new: dict):
    """The two constructed matrices compared, as ``audit diff`` compares the files."""
    return diff_matrices(Matrix.from_json(old), Matrix.from_json(new))


def matrix(cells: dict, *, env=None, digests=None, verdict="pass", owners=None) -> dict:
    """cells: {(entry, check): status}; every cell float64 on cpu."""
    entries: dict[str, dict] = {}
    for (name, check), status in cells.items():
        entry = entries.setdefault(name, {"name": name, "owner": (owners or {}).get(name, ["@team"]),
                                          "digest": (digests or {}).get(name, "d0"), "cells": []})
        entry["cells"].append({"check": check, "dtype": "float64", "device": "cpu", "status": status,
                               "message": f"{check} says {status}", "repro": f"audit repro {name} {check}"})
    return {"schema": "audit-matrix/1", "environment": {**ENV, **(env or {})}, "entries": list(entries.values()),
            "verdict": verdict}


@pytest.mark.parametrize("old, new, kind", [
    ("pass", "fail", "regression"), ("pass", "error", "regression"), ("xpass", "fail", "regression"),
    ("waived", "fail", "regression"), ("skip", "fail", "regression"), ("fail", "pass", "fix"),
    ("error", "skip", "fix"), ("fail", "error", "still_failing"), ("pass", "unsupported", "newly_unsupported"),
    ("xpass", "unsupported", "newly_unsupported"), ("unsupported", "xpass", "newly_passing"),
    ("waived", "xpass", "newly_passing"), ("pass", "skip", "newly_skipped"), ("skip", "pass", "no_longer_skipped"),
    ("pass", "xpass", "other"), ("pass", "pass", None), ("unsupported", "unsupported", None),
])
def test_every_status_change_has_one_class(old, new, kind):
    assert classify(old, new) == kind


def test_diff_separates_code_changes_from_environment_changes():
    old = matrix({("cube", "gradcheck"): "pass", ("sq", "gradcheck"): "pass", ("gone", "forward"): "pass"})
    new = matrix({("cube", "gradcheck"): "fail", ("sq", "gradcheck"): "pass", ("sq", "vmap"): "xpass",
                  ("fresh", "forward"): "pass"}, env={"torch": "2.13.0"}, digests={"cube": "d1"})
    d = diff(old, new)
    assert [c.where for c in d.of("regression")] == ["cube gradcheck (float64, cpu)"]
    assert d.regressed and d.digests_changed == ("cube",)
    assert d.environment_changed == (("torch", "2.12.0", "2.13.0"),)
    assert d.entries_added == ("fresh",) and d.entries_removed == ("gone",)
    assert d.cells_added == ("sq vmap (float64, cpu)",) and d.cells_removed == ()
    text = render_text(d)
    assert text.startswith("audit diff: REGRESSION (1 regression)")
    assert "environment changed: torch 2.12.0 -> 2.13.0" in text
    assert "cube gradcheck (float64, cpu): pass -> fail (target code and environment changed)" in text


def test_regressions_come_first_grouped_by_cause_with_their_owners():
    old = matrix({("a", "gradcheck"): "pass", ("b", "gradcheck"): "pass", ("c", "forward"): "fail"})
    new = matrix({("a", "gradcheck"): "fail", ("b", "gradcheck"): "error", ("c", "forward"): "pass"},
                 owners={"a": ["@kernels"], "b": ["@core"]})
    text = render_text(diff(old, new))
    assert "  [1] gradcheck: gradcheck says fail: 1 cell in 1 entry; owner @kernels" in text
    assert text.index("[1] gradcheck") < text.index("[2] gradcheck: gradcheck says error") < text.index("Fixes")
    assert "(same code and environment: not deterministic?)" in text
    markdown = render_markdown(diff(old, new))
    assert markdown.startswith("## audit diff: REGRESSION (2 regression, 1 fix)")
    assert "**2. gradcheck: gradcheck says error**: 1 cell in 1 entry; owner @core" in markdown
    assert "| a gradcheck (float64, cpu) | pass | fail |" in markdown


def test_a_diff_where_one_feature_broke_shows_one_group_of_regressions():
    """Sixty gradcheck cells of thirty entries, passing before, all failing now with one declared kind and
    messages that differ only in their numbers: one cause, every cell under it, its kind in the JSON."""
    from tests.reporters.sample import many

    broken = many()
    for entry in broken["entries"]:
        entry["cells"] = [c for c in entry["cells"] if c["check"] == "gradcheck"]
    working = json.loads(json.dumps(broken))
    for cell in (c for e in working["entries"] for c in e["cells"]):
        cell.update(status="pass", message="", kind="")
        del cell["kind"]
    d = diff(working, broken)
    text, markdown = render_text(d), render_markdown(d)
    assert len(d.of("regression")) == 60 and text.count("  [") == 1 and "[2]" not in text
    assert ("  [1] gradcheck: gradient of input # — max |analytic - numeric| = # at index (#) (analytic #, "
            "numeric #); on ([#]): 60 cells in 30 entries; owners @kernels, @speech, @vision") in text
    assert markdown.count("**1. gradcheck: gradient of input #") == 1 and "**2." not in markdown
    assert {c["kind"] for c in d.to_json()["changes"]["regression"]} == {"gradient of input 1"}


def test_diff_command_formats_and_exit_codes(tmp_path):
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(json.dumps(matrix({("cube", "gradcheck"): "pass", ("cube", "vmap"): "unsupported"})))
    new.write_text(json.dumps(matrix({("cube", "gradcheck"): "pass", ("cube", "vmap"): "xpass"})))
    result = CliRunner().invoke(cli, ["diff", str(old), str(new), "--format", "json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["verdict"] == "no regression" and data["changes"]["newly_passing"][0]["check"] == "vmap"
    backwards = CliRunner().invoke(cli, ["diff", str(new), str(old), "--out", str(tmp_path / "d.md"),
                                         "--format", "markdown"])
    assert backwards.exit_code == 0 and "Newly unsupported" in (tmp_path / "d.md").read_text()
    new.write_text(json.dumps(matrix({("cube", "gradcheck"): "fail", ("cube", "vmap"): "xpass"})))
    assert CliRunner().invoke(cli, ["diff", str(old), str(new)]).exit_code == 1


@pytest.mark.parametrize("content, words", [
    (None, "no such file"), ("{not json", "not JSON"), ('{"schema": "other"}', "not an autograd-audit matrix"),
    ('{"schema": "audit-matrix/1", "entries": [{"cells": []}]}', "not a valid autograd-audit matrix: KeyError: 'name'"),
    ('{"schema": "audit-matrix/1", "entries": [{"name": "a", "cells": [{"check": "forward", "dtype": "float64", '
     '"device": "cpu", "status": "great"}]}]}', "'great' is not a valid Status"),
])
def test_diff_refuses_what_is_not_a_matrix(tmp_path, content, words):
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    good.write_text(json.dumps(matrix({("cube", "forward"): "pass"})))
    if content is not None:
        bad.write_text(content)
    result = CliRunner().invoke(cli, ["diff", str(good), str(bad)])
    assert result.exit_code == 2 and words in result.output and "Traceback" not in result.output


def test_an_unclaimed_error_is_not_a_regression():
    """An unclaimed probe that hangs in the new run is reported, but does not fail ``audit diff``."""
    old = matrix({("cube", "dtype"): "xpass", ("sq", "dtype"): "pass"})
    new = matrix({("cube", "dtype"): "error", ("sq", "dtype"): "error"})
    for entry in new["entries"]:
        entry["cells"][0]["claimed"] = entry["name"] == "sq"
    d = diff(old, new)
    assert [c.where for c in d.of("regression")] == ["sq dtype (float64, cpu)"]
    assert [c.where for c in d.of("other")] == ["cube dtype (float64, cpu)"]


def _with_ratios(ratios: dict) -> dict:
    found = matrix({("kernel", "gradcheck"): "pass"})
    found["entries"][0]["cells"][0]["metrics"] = {"error_ratio": ratios}
    return found


def test_an_error_ratio_that_grew_is_an_accuracy_drift_that_does_not_gate():
    d = diff(_with_ratios({"gradient of input 0": 1.0, "output 0": 0.3}),
             _with_ratios({"gradient of input 0": 1.9, "output 0": 0.45}))
    (drift,) = d.of("accuracy_drift")
    assert drift.old == drift.new == "pass" and not d.regressed
    assert drift.message.startswith("gradient of input 0: error ratio 1 -> 1.9"), drift.message
    assert "output 0" not in drift.message  # 0.3 -> 0.45: below half the reference's own, noise
    assert "Accuracy drift" in render_text(d)


@pytest.mark.parametrize("before, after", [(1.0, 1.4), (0.2, 0.45), (1.9, 1.0)])
def test_a_ratio_within_its_drift_or_below_the_reference_is_no_change(before, after):
    assert not diff(_with_ratios({"output 0": before}), _with_ratios({"output 0": after})).changes

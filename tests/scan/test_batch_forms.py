"""A kind model's ``make_batch`` gives the model's inputs as users write them: a bare tensor (the model's one
argument), a tuple (its positional arguments), a dict (its keyword arguments). ``audit scan`` takes each, ``--write``
drafts the model's entry and ``audit run`` trains it; a batch in another form is a usage error saying what was
expected and what came back (tests/fixtures/layers.py)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.scan import stubs
from tests.conftest import ROOT

L = "tests.fixtures.layers"
#: The model factory of each form.
FORMS = {"tensor": f"{L}:bare_tensor_batches", "tuple": f"{L}:two_argument_batches", "dict": f"{L}:keyword_batches"}
#: The custom Functions each of them runs.
FUNCTIONS = {f"{L}:ClampedLog", f"{L}:FixedCenter"}


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


@pytest.mark.parametrize("form", FORMS)
def test_scan_runs_the_model_on_batches_in_each_form(tmp_path, monkeypatch, form):
    monkeypatch.chdir(ROOT)
    result = _run("scan", FORMS[form], "--registry", tmp_path / "none.yaml", "--format", "json")
    assert result.exit_code == 1, result.output  # the Functions it runs are not registered: the intake gate
    found = {f["target"]: f for f in json.loads(result.output)["used_but_unregistered"]}
    assert set(found) == FUNCTIONS, found
    log = found[f"{L}:ClampedLog"]
    assert log["calls"] == 4 and log["signatures"] == ["(float32[8, 4] strides [4, 1] cpu)"], log  # 4 whole batches


def test_scan_of_a_batch_in_another_form_says_what_was_expected_and_what_came_back(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["scan", f"{L}:whole_batch_as_dict", "--registry", str(tmp_path / "none.yaml")])
    assert result.exit_code == 2, result.output
    assert (f"MODEL {L}:whole_batch_as_dict: make_batch(size, seed) must return (inputs, targets), inputs a tensor "
            "(the model's one argument), a tuple or list (its positional arguments) or a dict of str to values (its "
            "keyword arguments); got a dict with keys 'features', 'labels'") in result.output, result.output
    assert "the audit itself failed" not in result.output


@pytest.mark.slow
def test_models_scanned_with_write_in_each_form_then_run_pass(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text("version: 1\nentries: []\n")
    monkeypatch.chdir(ROOT)
    for spec in FORMS.values():
        result = _run("scan", spec, "--registry", registry, "--write")
        assert "wrote" in result.output, result.output
        registry.write_text(registry.read_text().replace(repr(stubs.PLACEHOLDER), "'@layers'"))  # as a person would
    out = tmp_path / "out"
    result = _run("run", "--registry", registry, "--out", out, "--progress", "off", "--no-cache",
                  "--check", "train_step", "--check", "accumulation")
    matrix = json.loads((out / "matrix.json").read_text())
    models = {e["target"]: e for e in matrix["entries"] if e["kind"] == "model"}
    assert set(models) == set(FORMS.values()), matrix["entries"]
    cells = {(target, c["check"], c["dtype"]): c for target, e in models.items() for c in e["cells"]
             if c["device"] == "cpu"}
    assert {(t, check) for t, check, _ in cells} == {(t, check) for t in FORMS.values()
                                                      for check in ("train_step", "accumulation")}
    assert all(c["status"] == "pass" for c in cells.values()), {k: c["message"] for k, c in cells.items()}
    assert result.exit_code == 0, result.output

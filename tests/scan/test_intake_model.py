"""New-model intake end to end on a spiking network (tests/fixtures/snn_intake.py): the one ``kind: model`` factory
serves the scan and the run; the stubs say which Function's backward looks intended and which returns another
dtype, draw the spike's membrane potential on both sides of its threshold, and the model gets its own entry."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from audit.cli import cli
from audit.registry.load import load_registry
from audit.scan import stubs
from tests.conftest import ROOT

MODEL = "tests.fixtures.snn_intake:build"


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def _scanned(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text("version: 1\nentries: []\n")
    monkeypatch.chdir(ROOT)
    result = _run("scan", MODEL, "--registry", registry, "--write")
    assert result.exit_code == 1, result.output
    return registry, result


def test_the_kind_model_factory_is_scanned_over_several_batches(tmp_path, monkeypatch):
    registry, result = _scanned(tmp_path, monkeypatch)
    assert "wrote 4 stub(s)" in result.output and "2 with a NOTE" in result.output, result.output
    text = registry.read_text()
    loaded = load_registry_with_owners(registry)
    assert {e.name: e.kind for e in loaded.entries} == {"softsign": "function", "arctan_spike": "function",
                                                      "rate": "function", "snn_intake_model": "model"}
    assert loaded.entry("snn_intake_model").target == MODEL
    spike = loaded.entry("arctan_spike").inputs[0]
    assert spike.domain[0] < 0 < spike.domain[1], "the membrane potential is drawn on both sides of the threshold"
    assert spike.shape == (8, 6)  # make_batch's size, as the kind model entry trains with
    # the notes, as comments above their entries
    spike_note = text[text.index("# NOTE arctan_spike"):text.index("- name: arctan_spike")]
    assert "backward looks intended" in spike_note and "`proxy:`" in spike_note
    rate_note = text[text.index("# NOTE rate"):text.index("- name: rate")]
    assert "float64 for float32 inputs" in rate_note
    assert "# NOTE softsign" not in text


def test_scan_explain_says_why_each_value_was_chosen(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text("version: 1\nentries: []\n")
    monkeypatch.chdir(ROOT)
    result = _run("scan", MODEL, "--registry", registry, "--explain", "--format", "json")
    why = json.loads(result.output)["explain"]
    assert any("both signs drawn" in line for line in why["arctan_spike"]), why["arctan_spike"]
    assert any("the values seen over 4 call(s)" in line for line in why["softsign"]), why["softsign"]
    assert registry.read_text() == "version: 1\nentries: []\n", "--explain alone writes nothing"


def test_a_domain_is_not_widened_where_the_function_is_not_finite_with_the_other_sign():
    import torch

    from audit.scan.findings import Call, Finding

    class Log(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.log(x)

    finding = Finding("function", "m:Log", calls=[Call((("tensor", (3,), "float32", (1,), "cpu", True, 0.2, 0.9),))],
                      sample=(torch.tensor([0.2, 0.5, 0.9]),))
    why: list = []
    inputs, _ = stubs.infer(finding, why, Log.apply)
    assert inputs[0]["domain"] == [0.2, 0.9] and "not widened" in why[0], why


def test_a_model_that_has_its_entry_gets_no_second_one(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text(f"version: 1\nentries:\n  - {{name: net, owner: '@snn', kind: model, target: '{MODEL}'}}\n")
    monkeypatch.chdir(ROOT)
    _run("scan", MODEL, "--registry", registry, "--write")
    assert sum(e.kind == "model" for e in load_registry_with_owners(registry).entries) == 1


def load_registry_with_owners(path):
    """The registry with the placeholder owners filled in, as a person would."""
    path.write_text(path.read_text().replace(repr(stubs.PLACEHOLDER), "'@snn'"))
    return load_registry(path)


@pytest.mark.slow
def test_from_an_empty_registry_to_verdicts_that_say_what_is_wrong(tmp_path, monkeypatch):
    registry, _ = _scanned(tmp_path, monkeypatch)
    load_registry_with_owners(registry)
    checks = ["--check", "forward", "--check", "gradcheck", "--check", "dtype", "--check", "train_step"]

    def verdicts():
        out = tmp_path / "out"
        _run("run", "--registry", registry, "--out", out, "--progress", "off", "--examples", "5", "--no-cache", *checks)
        matrix = json.loads((out / "matrix.json").read_text())
        return {(e["name"], c["check"], c["dtype"]): c for e in matrix["entries"] for c in e["cells"]
                if c["device"] == "cpu"}

    found = verdicts()
    assert found[("softsign", "gradcheck", "float64")]["status"] == "pass"
    assert found[("snn_intake_model", "train_step", "float32")]["status"] == "pass"
    assert found[("rate", "dtype", "float32")]["status"] == "fail"
    assert "float64 for float32 inputs" in found[("rate", "dtype", "float32")]["message"]
    spike = found[("arctan_spike", "gradcheck", "float64")]
    assert spike["status"] == "fail" and "numeric 0" in spike["message"], spike  # what the NOTE warned of
    # the NOTE followed: the intended gradient declared, the threshold kept off the draws
    data = yaml.safe_load(registry.read_text())
    for entry in data["entries"]:
        if entry["name"] == "arctan_spike":
            entry["proxy"] = "tests.fixtures.intended:arctan_primitive"
            entry["inputs"][0]["kinks"] = [0]
    registry.write_text(yaml.safe_dump(data, sort_keys=False))
    assert verdicts()[("arctan_spike", "gradcheck", "float64")]["status"] == "pass"


def test_a_forward_that_returns_float32_for_the_float64_a_stub_claims_gets_a_note():
    import torch

    from audit.scan import probe
    from audit.scan.findings import Finding

    class Spike(torch.autograd.Function):  # snntorch 1.0's surrogates: (input_ > 0).float() whatever the input
        @staticmethod
        def forward(ctx, x):
            return (x > 0).float()

        @staticmethod
        def backward(ctx, grad):
            return grad

    seen_in_float32 = Finding("function", "m:Spike", sample=(torch.tensor([-0.5, 0.5]),))
    notes = probe.notes(seen_in_float32, Spike.apply)
    assert any("float32 for float64 inputs" in note for note in notes), notes
    assert any("backward looks intended" in note for note in notes), notes

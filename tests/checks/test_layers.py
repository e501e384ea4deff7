"""Modules and models: each layer's checks catch the bug a layer above the operator reveals."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.core.errors import RegistryError
from audit.results.kinds import ErrorKind
from audit.results.outcome import ERRORED, HELD, VIOLATED
from tests.helpers import entry, observe

L = "tests.fixtures.layers"
MODULE = {"kind": "module", "inputs": [{"shape": ["B", 3]}], "dims": {"B": [1, 3]}}
MODEL = {"kind": "model"}

# (broken target, check, registry keys, dtype, words, correct twin)
CASES = [
    (f"{L}:WrongBlock", "gradcheck", MODULE, "float64", "with respect to input 0", f"{L}:Block"),
    (f"{L}:WrongWeightGrad", "gradcheck", MODULE, "float64", "with respect to parameter 'w'", f"{L}:Scaled"),
    (f"{L}:LostScale", "state_dict", MODULE, "float64", "register_buffer", f"{L}:KeptScale"),
    (f"{L}:nan_on_some_batches", "train_step", MODEL, "float32", "batch seed 5", f"{L}:healthy"),
    (f"{L}:state_across_calls", "accumulation", MODEL, "float32", "keeps state across calls", f"{L}:healthy"),
]


@pytest.mark.parametrize("broken, check, spec, dtype, words, twin", CASES, ids=[c[0].split(":")[1] for c in CASES])
def test_layer_check_catches_its_bug(tmp_path, broken, check, spec, dtype, words, twin):
    found = observe(entry(tmp_path, target=broken, **spec), check, dtype)
    assert found.verdict == VIOLATED, found
    assert words in found.message


@pytest.mark.parametrize("broken, check, spec, dtype, words, twin", CASES,
                         ids=[f"{c[5].split(':')[1]}-{c[1]}" for c in CASES])
def test_layer_check_passes_the_twin(tmp_path, broken, check, spec, dtype, words, twin):
    found = observe(entry(tmp_path, target=twin, **spec), check, dtype)
    assert found.verdict == HELD, found.message


def test_the_nan_is_traced_to_its_operation_and_custom_function(tmp_path):
    found = observe(entry(tmp_path, target=f"{L}:nan_on_some_batches", **MODEL), "train_step", "float32")
    assert "the loss is nan" in found.message
    assert "aten.log.default produced the first non-finite value" in found.message
    assert "layers.py" in found.message and "inside autograd.Function UncheckedLog" in found.message


def test_training_records_norms_losses_time_and_memory(tmp_path):
    found = observe(entry(tmp_path, target=f"{L}:healthy", training={"steps": 3}, **MODEL), "train_step", "float32")
    assert len(found.details["grad_norms"]) == 3 and found.details["losses"][-1] < found.details["losses"][0]
    assert found.details["step_seconds"] > 0 and found.details["peak_rss_mb"] > 0


#: Models whose make_batch gives the model's inputs in each form users write: a bare tensor, a tuple, a dict of kwargs.
BATCH_FORMS = ["bare_tensor_batches", "two_argument_batches", "keyword_batches"]


@pytest.mark.parametrize("check, dtype", [("train_step", "float32"), ("accumulation", "float32"),
                                          ("compile", "float64")])
@pytest.mark.parametrize("model", BATCH_FORMS)
def test_a_model_trains_on_batches_in_each_form(tmp_path, model, check, dtype):
    found = observe(entry(tmp_path, target=f"{L}:{model}", **MODEL), check, dtype)
    assert found.verdict == HELD, found.message


def test_micro_batches_of_keyword_arguments_find_state_kept_across_calls(tmp_path):
    found = observe(entry(tmp_path, target=f"{L}:keyword_state_across_calls", **MODEL), "accumulation", "float32")
    assert found.verdict == VIOLATED and "keeps state across calls" in found.message, found.message


@pytest.mark.parametrize("check", ["train_step", "accumulation", "compile"])
def test_a_batch_in_another_form_is_an_error_saying_what_was_expected(tmp_path, check):
    found = observe(entry(tmp_path, target=f"{L}:whole_batch_as_dict", **MODEL), check, "float32")
    assert found.verdict == ERRORED and found.kind == str(ErrorKind.REGISTRY_FAULT), found
    assert found.message.startswith("make_batch(size, seed) must return (inputs, targets), inputs a tensor (the "
                                    "model's one argument), a tuple or list"), found.message
    assert ("got a dict with keys 'features', 'labels' (the harness tests.fixtures.layers:whole_batch_as_dict "
            "returns, not the code the model runs)") in found.message, found.message


@pytest.mark.parametrize("check, dtype", [("compile", "float64"), ("noncontiguous", "float64"), ("dtype", "float32"),
                                          ("checkpoint", "float64"), ("determinism", "float64")])
def test_operator_checks_run_on_a_module(tmp_path, check, dtype):
    spec = {**MODULE, "supports": {"compile": True}}
    assert observe(entry(tmp_path, target=f"{L}:Block", **spec), check, dtype).verdict == HELD


def test_compiled_training_step_matches_eager(tmp_path):
    assert observe(entry(tmp_path, target=f"{L}:healthy", **MODEL), "compile", "float64").verdict == HELD


@pytest.mark.parametrize("spec, words", [
    ({"kind": "function", "inputs": []}, "expected at least one input"),
    ({"kind": "function", "inputs": [{"shape": [2]}], "training": {"steps": 3}}, "expected no training settings"),
    ({"kind": "model", "training": {"steps": 1}}, "training.steps"),
])
def test_registry_rules_for_layers(tmp_path, spec, words):
    with pytest.raises(RegistryError, match=words.replace(".", r"\.")):
        entry(tmp_path, target=f"{L}:healthy", **spec)


@pytest.mark.slow
def test_a_registry_of_layers_gives_per_layer_results_and_replays_the_nan(write_registry, tmp_path, monkeypatch):
    entries = [{"name": "block", "target": f"{L}:WrongBlock", **MODULE},
               {"name": "net", "target": f"{L}:nan_on_some_batches", **MODEL}]
    registry = write_registry(entries, defaults={"owner": "@team", "supports": {"devices": ["cpu"]}})
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--progress", "off"])
    assert result.exit_code == 1
    assert "block [module]" in result.stdout and "net [model]" in result.stdout
    matrix = json.loads((out / "matrix.json").read_text())
    kinds = {e["name"]: {c["check"] for c in e["cells"]} for e in matrix["entries"]}
    assert {"state_dict", "gradcheck"} <= kinds["block"] and kinds["net"] == {"train_step", "accumulation", "compile"}
    replay = CliRunner().invoke(cli, ["repro", "net", "train_step", "--registry", str(registry), "--matrix",
                                      str(out / "matrix.json")])
    assert replay.exit_code == 1 and "inside autograd.Function UncheckedLog" in replay.output

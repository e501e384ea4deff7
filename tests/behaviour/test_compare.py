"""The behaviour comparison on planted changes, each with a twin that does not move: an output scaled by 1e-4, a
gradient off by 1e-5 (inside gradcheck's tolerance), a model's activation moved by 3%, a renamed parameter; compile
facts and cost from synthetic records."""

from __future__ import annotations

import pytest

from audit.behaviour.compare import Options, compare
from audit.behaviour.values import EPS, Cost, EntryRecord
from tests.behaviour.records import read, record, write_registry

GATING = ("values", "training", "checkpoint")


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """The old and new records of every planted entry, measured once for the module."""
    folder = tmp_path_factory.mktemp("records")
    registry = write_registry(folder)
    with pytest.MonkeyPatch.context() as patch:
        old = record(folder / "old", registry, new=False, monkeypatch=patch)
        new = record(folder / "new", registry, new=True, monkeypatch=patch, against=old)
        same = record(folder / "same", registry, new=False, monkeypatch=patch, against=old)
    return read(old), read(new), read(same)


def _moved(diff, kind: str) -> dict[str, list]:
    found: dict[str, list] = {}
    for m in diff.of(kind):
        found.setdefault(m.entry, []).append(m)
    return found


def test_each_planted_change_is_reported_in_its_class_and_no_twin_is(records):
    old, new, _ = records
    diff = compare(old, new, options=Options(repro="audit recheck {entry} --against old"))
    assert set(_moved(diff, "values")) == {"scaled", "sine", "drifting_model"}
    assert set(_moved(diff, "training")) == {"drifting_model"}
    assert set(_moved(diff, "checkpoint")) == {"renamed"}
    assert diff.regressed
    twins = {"steady", "steady_sine", "linear", "steady_model"}
    assert not twins & {m.entry for m in diff.moved if m.kind in GATING}


def test_a_value_change_names_the_value_both_numbers_the_allowance_and_the_replay(records):
    old, new, _ = records
    diff = compare(old, new, options=Options(repro="audit recheck {entry} --against old"))
    scaled = {m.what: m for m in _moved(diff, "values")["scaled"]}
    change = scaled["float32, cpu"]
    assert "max |new - old| =" in change.detail and "allowance" in change.detail
    assert "(old " in change.detail and ", new " in change.detail
    assert change.repro == "audit recheck scaled --against old --dtype float32"
    sine = {m.what: m for m in _moved(diff, "values")["sine"]}
    assert "gradient of input 0" in sine["float64, cpu"].detail  # 1e-5 relative: far beyond float64's own error


def test_unchanged_code_moves_nothing_that_gates(records):
    old, _, same = records
    diff = compare(old, same)
    assert not [m for m in diff.moved if m.gates], [m.detail for m in diff.moved if m.gates]
    assert {layer.name for layer in diff.layers} == {"operators", "modules", "models"}


def test_a_renamed_parameter_gates_with_the_key_names(records):
    old, new, _ = records
    details = [m.detail for m in _moved(compare(old, new), "checkpoint")["renamed"]]
    assert any("missing keys ['weight']" in d and "unexpected keys ['w']" in d for d in details)
    assert any("Missing key(s)" in d for d in details)  # the strict load of the old checkpoint, made here


def test_a_trajectory_is_judged_step_by_step(records):
    old, new, _ = records
    (first, *_) = _moved(compare(old, new), "training")["drifting_model"]
    assert " at step " in first.detail and first.gates


def test_every_value_carries_its_own_error(records):
    old, _, _ = records
    values = {(v.dtype, v.label): v for v in old.entries["steady"].values if v.kind == "output"}
    float32, float64 = values[("float32", "output 0")], values[("float64", "output 0")]
    assert 0 < float32.error < 1e-5
    assert float64.error == pytest.approx(float32.error * EPS["float64"] / EPS["float32"])


def _costs(old_seconds, new_seconds):
    def entry(seconds):
        return EntryRecord("op", "function", digest="d", cost=(Cost("float32", "cpu", tuple(seconds)),))

    return entry(old_seconds), entry(new_seconds)


def _record(base, entry):
    from dataclasses import replace

    return replace(base, entries={entry.name: entry}, files={})


def test_a_slower_backward_is_listed_beyond_the_noise_and_gates_only_at_the_chosen_slowdown(records):
    old, new, _ = records
    before, after = _costs([1e-3] * 7, [4e-3] * 7)
    diff = compare(_record(old, before), _record(new, after))
    (change,) = diff.of("cost")
    assert "4.00x, slower" in change.detail and not change.gates
    (gated,) = compare(_record(old, before), _record(new, after), options=Options(slowdown=3.0)).of("cost")
    assert gated.gates


def test_a_cost_inside_the_noise_band_is_not_listed(records):
    old, new, _ = records
    before, after = _costs([1e-3, 1e-3, 3e-3, 3e-3, 3e-3, 3e-3, 3e-3], [2.5e-3] * 7)
    assert not compare(_record(old, before), _record(new, after)).of("cost")


def test_graph_breaks_and_recompiles_that_grew_are_listed_without_gating(records):
    old, new, _ = records
    cells = {("breaking", "float64", "cpu"): ("callable", {"graph_breaks": 0, "recompiles": 1},
                                              {"graph_breaks": 2, "recompiles": 2, "graph_break": "user break"}),
             ("unbroken", "float64", "cpu"): ("callable", {"graph_breaks": 0, "recompiles": 1},
                                              {"graph_breaks": 0, "recompiles": 1})}
    (change,) = compare(old, new, cells).of("compile")
    assert change.entry == "breaking" and not change.gates
    assert "graph breaks 0 -> 2: user break" in change.detail and "recompiles 1 -> 2" in change.detail


def test_a_value_computed_at_import_is_reported_as_the_environment_not_code(records):
    old, new, _ = records
    found = _moved(compare(old, new), "environment")
    assert "tests.fixtures.drift.SCALE 1.0 -> 1.0001" in found["scaled"][0].detail
    assert "steady" not in found


def test_records_of_other_seeds_compare_no_values(records, tmp_path, monkeypatch):
    old, _, _ = records
    registry = write_registry(tmp_path, [e for e in __import__("tests.behaviour.records", fromlist=["x"]).ENTRIES
                                         if e["name"] == "scaled"])
    other = read(record(tmp_path / "other", registry, new=True, monkeypatch=monkeypatch, seed=5))
    diff = compare(old, other)
    assert not diff.of("values") and any("other seeds" in n for n in diff.notes)


def test_without_a_record_on_one_side_it_says_so_in_one_line(records):
    old, _, _ = records
    diff = compare(old, None)
    assert diff.note.startswith("behaviour not compared: the new matrix has no behaviour record")
    assert not diff.regressed


def test_every_format_of_the_diff_shows_the_layers_then_each_class(records):
    from audit.reporters.changes import render_markdown, render_text
    from audit.results.changes import diff
    from audit.results.matrix import Matrix

    old, new, _ = records
    behaviour = compare(old, new, options=Options(repro="audit recheck {entry} --against old"))
    verdicts = diff(Matrix(entries=()), Matrix(entries=()))
    text = render_text(verdicts, behaviour)
    assert text.startswith("audit diff: REGRESSION of behaviour (no status changed); behaviour moved: ")
    lines = text.splitlines()
    assert lines[2].startswith("  operators: 4 compared, moved: values 2")
    assert "  models: 2 compared, moved: values 1, training 1, environment 1" in lines
    assert text.index("Values moved beyond") < text.index("Checkpoints:") < text.index("Behaviour that depends")
    assert "    replay: audit recheck scaled --against old --dtype float64" in lines
    markdown = render_markdown(verdicts, behaviour)
    assert "### Behaviour, layer by layer" in markdown and "| renamed | state dict |" in markdown
    assert set(behaviour.to_json()["changes"]) == {"values", "training", "checkpoint", "compile", "cost",
                                                   "environment"}


def test_a_model_has_its_cost_and_an_operator_no_checkpoint_load(records):
    old, new, _ = records
    assert {c.dtype for c in old.entries["steady_model"].cost} == {"float64", "float32"}
    assert new.entries["steady"].load is None and new.entries["linear"].load == ""  # loaded strictly, --against


def test_the_fixed_cases_are_each_their_own_values():
    from audit.inputs.special import plain_cases
    from audit.registry.model import Entry, EntryKind, TensorSpec

    entry = Entry("e", ("@x",), EntryKind.CALLABLE, "m:f", (TensorSpec(("B", 4)),), dims=(("B", 1, 4),))
    small, large = (case.args[0].values for case in plain_cases(entry, 0))
    assert small.shape == (2, 4) and large.shape == (4, 4) and not (small[0] == large[0]).any()


def test_a_float64_only_target_keeps_every_value_with_the_rounding_floor(tmp_path):
    from audit.behaviour.measure import measure
    from audit.runtime.target import resolve
    from tests.helpers import ROOT, entry

    found = entry(tmp_path, kind="callable", target="tests.fixtures.mistakes:reference_raises_in_float32",
                  inputs=[{"shape": ["N"]}], supports={"dtypes": ["float64"]})
    record = measure(found, resolve(found, ROOT), 0, ("cpu",)).record
    kinds = [v.kind for v in record.values]
    assert kinds.count("output") == 2 and kinds.count("vjp") == 2  # two fixed cases, none dropped
    assert all(v.error == 0.0 and v.scale > 0 for v in record.values)

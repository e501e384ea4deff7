"""A behaviour record read back: every way it can be wrong is a usage error (exit 2) that says what to do, never a
traceback; and a target's digest that moves with its source text only."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from audit.behaviour import store
from audit.cli import cli
from audit.core.errors import UsageError
from audit.runtime import definition
from tests.behaviour.records import ENTRIES, read, record, write_registry


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    folder = tmp_path_factory.mktemp("made")
    registry = write_registry(folder, [e for e in ENTRIES if e["name"] in ("scaled", "linear")])
    with pytest.MonkeyPatch.context() as patch:
        return record(folder / "reports", registry, new=False, monkeypatch=patch)


@pytest.fixture
def copy(made, tmp_path):
    """A copy of the made reports folder, with a full matrix around its behaviour key, to break."""
    folder = tmp_path / "reports"
    shutil.copytree(made, folder)
    data = json.loads((folder / "matrix.json").read_text())
    data.update(schema="audit-matrix/1", entries=[])
    (folder / "matrix.json").write_text(json.dumps(data))
    return folder


def _entry_file(folder):
    return next((folder / "behaviour" / "entries").iterdir())


def _diff(folder) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["diff", str(folder / "matrix.json"), str(folder / "matrix.json")])
    return result.exit_code, result.output


def test_a_whole_record_reads_back_with_every_entry(made):
    found = read(made)
    assert set(found.entries) == {"scaled", "linear"}
    assert set(found.tensors("linear")) >= {"state/weight", "state/bias"}


def test_a_truncated_file_is_a_usage_error_naming_it(copy):
    path = _entry_file(copy)
    path.write_bytes(path.read_bytes()[:-10])
    code, output = _diff(copy)
    assert code == 2 and "truncated or changed" in output and path.name in output and "Traceback" not in output


def test_a_file_changed_in_place_fails_its_digest(copy):
    path = _entry_file(copy)
    data = bytearray(path.read_bytes())
    data[-30] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(UsageError, match="sha256 does not match"):
        store.read(str(copy / "matrix.json"), json.loads((copy / "matrix.json").read_text()))


def test_a_missing_file_or_manifest_is_named(copy):
    _entry_file(copy).unlink()
    code, output = _diff(copy)
    assert code == 2 and "missing" in output
    (copy / "behaviour" / "manifest.json").unlink()
    code, output = _diff(copy)
    assert code == 2 and "manifest.json is missing" in output


def test_a_manifest_of_another_run_or_format_is_refused(copy):
    manifest = copy / "behaviour" / "manifest.json"
    data = json.loads(manifest.read_text())
    data["schema"] = "audit-behaviour/0"
    manifest.write_text(json.dumps(data))
    with pytest.raises(UsageError, match=r"not the one .* records"):  # the matrix holds the manifest's digest
        store.read(str(copy / "matrix.json"), json.loads((copy / "matrix.json").read_text()))
    matrix = json.loads((copy / "matrix.json").read_text())
    matrix["behaviour"]["sha256"] = store.sha256(manifest)
    (copy / "matrix.json").write_text(json.dumps(matrix))
    code, output = _diff(copy)
    assert code == 2 and "another format ('audit-behaviour/0'" in output


def test_against_without_a_record_is_refused_before_anything_runs(tmp_path):
    registry = write_registry(tmp_path, [ENTRIES[0]])
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--record", "--against", str(tmp_path),
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2 and "no behaviour record there" in result.output
    assert not (tmp_path / "out" / "matrix.json").exists()


def test_a_digest_moves_with_source_text_not_with_a_value_computed_at_import(monkeypatch):
    from tests.fixtures import drift

    before = definition.sources(drift.scaled)
    monkeypatch.setattr(drift, "SCALE", 2.0)  # what an import under another torch computes
    assert definition.sources(drift.scaled) == before
    assert definition.constants(drift.scaled)["tests.fixtures.drift.SCALE"] == "2.0"
    assert any("SCALE = 1.0 + 1e-4 if NEW else 1.0" in text for text in before)  # its assignment is hashed


def test_a_merge_of_shards_names_no_behaviour_record_and_says_why(tmp_path):
    from audit.app.shard import merge
    from audit.results.matrix import Matrix

    def shard(index: int) -> Matrix:
        return Matrix(entries=(), environment={"registry_sha256": "r"}, behaviour={"manifest": "m", "sha256": "s"},
                      shard={"index": index, "count": 2, "selected": []})

    assert merge([("a", shard(1)), ("b", shard(2))], strict=False).behaviour is None


def test_a_record_over_the_budget_is_dropped_and_says_so(tmp_path, monkeypatch):
    from audit.behaviour import worker
    from audit.behaviour.values import EntryRecord, Value

    monkeypatch.setattr(store, "BUDGET_BYTES", 10)
    path = tmp_path / "e.pt"
    path.write_bytes(b"x" * 100)
    record = EntryRecord("e", "callable", values=(Value("k", "output", "output 0", "float64", "cpu", "", 0.0, 1.0),))
    found = worker._within_budget(record, path)
    assert found.error.startswith("its record is 0 MiB, over the budget of 0 MiB") and not found.values
    assert not path.exists()

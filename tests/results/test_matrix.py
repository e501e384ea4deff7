"""The Matrix type: matrix.json read and written back is the same text, whatever keys the file has."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from audit.results.matrix import Matrix, read_matrix
from audit.app.shard import merge
from tests.reporters.sample import hostile, matrix

BASELINE = Path(__file__).resolve().parents[2] / "reports" / "baseline.json"


def _with_everything() -> dict:
    """The sample with a shard record, further failures, and keys this version does not know at every level."""
    data = matrix()
    data["shard"] = {"index": 1, "count": 2, "selected": ["cube", "softmax", "hang"]}
    data["future"] = {"kept": True}
    entry = data["entries"][0]
    entry["target_error"] = "cannot import pkg.ops"
    entry["x-team"] = "kernels"
    cell = entry["cells"][1]
    cell["expected"] = True
    cell["x-ticket"] = "#42"
    cell["failures"] = [{"message": cell["message"], "case": cell["case"], "repro": "python out/repro/c.py"},
                        {"message": "raised ValueError", "case": None, "repro": "python out/repro/c-2.py",
                         "x-kind": "raise"}]
    return data


def _minimal() -> dict:
    """What a hand-written matrix may leave out: no created, summary, kind, target, digest, claimed, seconds..."""
    return {"schema": "audit-matrix/1", "environment": {"seed": 0}, "entries": [
        {"name": "cube", "owner": ["@t"], "cells": [{"check": "forward", "dtype": "float64", "device": "cpu",
                                                   "status": "fail", "message": "off by one"}]}]}


@pytest.mark.parametrize("data", [matrix(), hostile(), _with_everything(), _minimal()],
                         ids=["sample", "hostile", "every-key", "minimal"])
def test_from_json_then_to_json_gives_the_same_object(data):
    before = copy.deepcopy(data)
    assert Matrix.from_json(data).to_json() == before
    assert data == before  # reading does not touch what it read


def test_the_baseline_reads_back_to_the_same_bytes():
    text = BASELINE.read_text()
    assert Matrix.from_json(json.loads(text)).to_text() == text


def test_read_matrix_gives_the_typed_cells(tmp_path):
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(_with_everything()))
    found = read_matrix(str(path))
    cube = found.entries[0]
    assert (cube.name, cube.owners, cube.line, cube.registry_line) == ("cube", ("@ml-kernels",), 9, 9)
    assert [c.status.value for c in cube.cells] == ["pass", "fail", "skip", "unsupported", "xpass"]
    assert cube.cells[1].failures[1].repro == "python out/repro/c-2.py" and found.verdict == "fail"
    assert found.to_text() == json.dumps(_with_everything(), indent=2, sort_keys=True) + "\n"


def test_judged_counts_and_gates_without_changing_the_matrix():
    loaded = Matrix.from_json(matrix())
    relaxed = Matrix.from_json(dict(matrix(), verdict="pass")).judged(strict=False)
    assert relaxed.verdict == "fail" and relaxed.summary == loaded.summary
    cube = matrix()["entries"][0]
    only_xpass = Matrix.from_json({**matrix(), "entries": [dict(cube, cells=[cube["cells"][4]])]})
    assert only_xpass.judged(strict=False).verdict == "pass" and only_xpass.judged(strict=True).verdict == "fail"


def test_merge_keeps_what_the_shards_carry_and_drops_the_shard_record():
    first, second = _with_everything(), _with_everything()
    second["shard"] = dict(second["shard"], index=2)
    second["entries"] = []
    merged = merge([("a.json", Matrix.from_json(first)), ("b.json", Matrix.from_json(second))]).to_json()
    assert "shard" not in merged and merged["future"] == {"kept": True}
    assert merged["entries"] == first["entries"] and merged["verdict"] == "fail"
    assert merged["created"] != first["created"]

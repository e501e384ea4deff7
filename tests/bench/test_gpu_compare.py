"""A plant's matrix against its expectations: met, a status off (with the cell's message), a cell missing, a run
that gave no matrix."""

from __future__ import annotations

from bench.gpu.compare import mismatches, not_run
from bench.gpu.plants import PLANTS

PLANT = next(p for p in PLANTS if p.name == "parity")


def matrix(statuses: dict) -> dict:
    """A matrix with one float64 cell per (entry, check, device): ``statuses`` maps each to its status."""
    entries: dict[str, list] = {}
    for (name, check, device), status in statuses.items():
        entries.setdefault(name, []).append({"check": check, "dtype": "float64", "device": device, "status": status,
                                             "message": f"{check} said so\n  on two lines"})
    return {"entries": [{"name": name, "cells": cells} for name, cells in entries.items()]}


def as_expected() -> dict:
    return {(e.entry, e.check, e.device): e.status for e in PLANT.expected()}


def test_a_matrix_as_expected_has_no_mismatch():
    assert mismatches(PLANT, matrix(as_expected())) == ()


def test_a_bug_not_caught_and_a_twin_that_fails_are_mismatches_quoting_the_cell():
    statuses = {**as_expected(), ("gelu_fast_on_cuda", "device", "cuda"): "pass", ("gelu", "gradcheck", "cuda"): "fail"}
    found = [str(m) for m in mismatches(PLANT, matrix(statuses))]
    assert found == ["gelu_fast_on_cuda device (cuda): expected fail, got pass: device said so on two lines",
                     "gelu gradcheck (cuda): expected pass, got fail: gradcheck said so on two lines"]


def test_every_cell_of_an_expectation_counts_whatever_its_dtype():
    document = matrix(as_expected())
    twin = next(e for e in document["entries"] if e["name"] == "gelu")
    twin["cells"].append({"check": "device", "dtype": "float32", "device": "cuda", "status": "error", "message": "x"})
    assert [m.got for m in mismatches(PLANT, document)] == ["error"]


def test_a_missing_cell_is_a_mismatch():
    statuses = as_expected()
    del statuses["gelu", "device", "cuda"]
    assert [str(m) for m in mismatches(PLANT, matrix(statuses))] == ["gelu device (cuda): expected pass, got missing"]


def test_a_run_without_a_matrix_misses_every_expectation_saying_why():
    found = not_run(PLANT, "stopped at the stage's time limit")
    assert len(found) == len(PLANT.expected()) and all(m.got == "missing" for m in found)
    assert str(found[0]).endswith("got missing: stopped at the stage's time limit")

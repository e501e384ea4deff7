"""The floor (bench/floor.py) does the audit's work, in step: on one cell, the same cases (drawn and special points,
value for value, in order) and the same calls of torch's checking entry points (gradcheck, gradgradcheck, opcheck,
vmap, jacrev, jacfwd, compile) as the audit makes.

The audit's side runs in this process (audit.api), its cases recorded and its torch entry points counted; the floor
then runs on the cell as the audit's matrix gives it, recorded and counted the same way. A check that gained a
comparison (or lost one), cases drawn another way, a floor that skips the special points: they differ."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
import yaml

from audit.api import audit
from audit.checking import judgement
from audit.toolkit import dynamo
from bench import floor

REGISTRY = Path(__file__).resolve().parents[2] / "bench" / "registry.yaml"
#: torch's checking entry points, by where the audit and the floor call them.
ENTRY_POINTS = [(torch.autograd, "gradcheck"), (torch.autograd, "gradgradcheck"), (torch.library, "opcheck"),
                (torch.func, "vmap"), (torch.func, "jacrev"), (torch.func, "jacfwd"), (torch, "compile")]


@pytest.fixture
def counted(monkeypatch):
    """A Counter of calls to each of :data:`ENTRY_POINTS` from now on."""
    calls: Counter = Counter()
    for owner, name in ENTRY_POINTS:
        monkeypatch.setattr(owner, name, _counting(calls, name, getattr(owner, name)))
    return calls


def _counting(calls: Counter, name: str, inner):
    def wrapper(*args, **kwargs):
        calls[name] += 1
        return inner(*args, **kwargs)

    return wrapper


def _entry(name: str) -> dict:
    document = yaml.safe_load(REGISTRY.read_text())
    return next(e for e in document["entries"] if e["name"] == name)


def _audited(name: str, check: str, examples: int, seen: list | None = None) -> dict:
    """The audit's cell of entry ``name`` for ``check``, run here, as its matrix row gives it; ``seen`` gets each case
    the cell's property ran on."""
    spec = {k: v for k, v in _entry(name).items() if k not in ("name", "target", "owner")}
    spec.setdefault("supports", {})
    spec["supports"] = {"dtypes": ["float64"], **spec["supports"]}
    examine = judgement.examine

    def recorded(check_, subject, case):
        if seen is not None:
            seen.append(case)
        return examine(check_, subject, case)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(judgement, "examine", recorded)
        result = audit(_entry(name)["target"], name=name, checks=[check], examples=examples, **spec)
    cells = [{"check": c.check, "dtype": c.dtype, "device": c.device, "examples": c.examples, "metrics": c.metrics,
              "status": c.status.value} for c in result.cells if c.check == check]
    assert cells and all(c["status"] == "pass" for c in cells), cells  # a failing cell would stop early: not this test
    return {"entries": [{"name": name, "cells": cells}]}


@pytest.mark.parametrize(("name", "check"), [
    ("power2", "gradcheck"), ("logsumexp", "gradcheck"), ("softplus_mlp", "gradcheck"),
    ("power2", "gradgradcheck"), ("softplus", "opcheck"), ("power2", "vmap"), ("logsumexp", "vmap"),
    ("power2", "compile"),
])
def test_the_floor_runs_the_audits_cases_and_calls_torchs_checks_as_often(counted, name, check):
    dynamo.warm("aot_eager")  # the audit's once-per-process warm-up, before anything is counted
    counted.clear()
    theirs: list = []
    matrix = _audited(name, check, examples=3, seen=theirs)
    audits = Counter(counted)
    counted.clear()
    mine: list = []
    _, cases, failures = floor.run(REGISTRY, matrix, on_case=lambda *told: mine.append(told[2]))
    cell = matrix["entries"][0]["cells"][0]
    assert failures == 0
    assert len(mine) == cases[check] == cell["examples"] + cell["metrics"].get("special_points", 0)
    assert [case.to_json() for case in mine] == [case.to_json() for case in theirs]
    assert counted == audits and sum(audits.values()) > 0


def test_the_special_points_run_after_the_drawn_cases_as_many_as_the_audit_ran():
    matrix = _audited("power2", "gradcheck", examples=2)
    cell = matrix["entries"][0]["cells"][0]
    seen: list = []
    floor.run(REGISTRY, matrix, on_case=lambda *told: seen.append(told[2]))
    assert cell["metrics"]["special_points"] > 0
    assert len(seen) == 2 + cell["metrics"]["special_points"]
    assert all(case.dims == (("B", 2), ("N", 2)) for case in seen[2:-1])  # the structured ones, then the largest
    assert seen[-1].dims == (("B", 4), ("N", 6))


def test_a_cell_stops_at_its_first_failing_case_and_counts_it():
    matrix = {"entries": [{"name": "row_norm", "cells": [
        {"check": "vmap", "dtype": "float64", "device": "cpu", "examples": 3, "metrics": {}}]}]}
    _, cases, failures = floor.run(REGISTRY, matrix)
    assert cases == {"vmap": 1} and failures == 1  # _RowNorm has no vmap support: the first case fails, the cell stops


def test_gradcheck_compares_the_gradient_with_the_references(monkeypatch):
    """A reference whose gradient differs (its value the same): finite differences of the target pass, the floor's
    comparison with the reference fails, as the audit's does."""
    matrix = {"entries": [{"name": "logsumexp", "cells": [
        {"check": "gradcheck", "dtype": "float64", "device": "cpu", "examples": 2, "metrics": {}}]}]}
    assert floor.run(REGISTRY, matrix)[2] == 0
    built = floor.Target.__init__

    def with_a_wrong_reference(self, entry, dtype):
        built(self, entry, dtype)
        right = self.reference
        self.reference = lambda x: right(x) + (x - x.detach()).sum() * 0.5  # same value, gradient off by 0.5
    monkeypatch.setattr(floor.Target, "__init__", with_a_wrong_reference)
    assert floor.run(REGISTRY, matrix)[2] == 1

"""An entry whose import patches torch changes no neighbour's verdict: its worker retires after it.

Each planted patcher (tests/fixtures/patchers: ``torch.softmax``, the ``Tensor.softmax`` method,
``torch.nn.functional.softmax``, a global module hook, a torch-function mode left on the stack, a Python kernel
for ``aten::_softmax``) is followed by correct softmax neighbours whose references reach softmax each of those
ways (tests/fixtures/patched_neighbours). The registry runs in two orders, at ``-j 1`` and ``-j 2``; every
neighbour's cells must equal its solo run, and every patcher's cells must say what it changed.
"""

from __future__ import annotations

import json

import pytest

from audit.reporters.terminal import render
from audit.results.matrix import read_matrix

from tests.conftest import ROOT
from tests.engine.test_neighbours import _registry, _run

pytestmark = pytest.mark.slow

PATCHERS = {"function": "replaced torch.softmax", "method": "replaced torch.Tensor.softmax",
            "functional": "replaced torch.nn.functional.softmax",
            "hook": "registered a global module forward hook", "mode": "left the mode Doubling on torch's mode stack",
            "kernel": "registered a Python kernel for aten::_softmax (CPU)"}
REFERENCES = ("by_torch", "by_method", "by_functional", "by_module")
N = "tests.fixtures.patched_neighbours"
CHECKS: list[str] = []  # forward and gradcheck, as test_neighbours runs them


def _entry(name: str, target: str, reference: str | None = None) -> dict:
    spec = {"name": name, "target": target, "inputs": [{"shape": [2, "N"]}], "dims": {"N": [1, 4]}}
    return {**spec, "reference": reference} if reference else spec


def _orders() -> dict[str, list[dict]]:
    def block(patcher: str, references) -> list[dict]:
        return [_entry(patcher, f"tests.fixtures.patchers.{patcher}:Softmax")] + [
            _entry(f"{ref}_after_{patcher}", f"{N}:Softmax", f"{N}:{ref}") for ref in references]

    return {"forward": [e for p in PATCHERS for e in block(p, REFERENCES)],
            "reversed": [e for p in reversed(PATCHERS) for e in block(p, REFERENCES[::-1])]}


def test_a_neighbour_after_a_package_that_patches_torch_equals_its_solo_run(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    orders = _orders()
    neighbours = [e for e in orders["forward"] if "_after_" in e["name"]]
    solo = _run(_registry(tmp_path / "solo.yaml", neighbours), tmp_path / "solo", *CHECKS, "-j", "4")
    assert all(status == "pass" for cells in solo.values() for _, status, _, _ in cells), solo
    for order, entries in orders.items():
        registry = _registry(tmp_path / f"{order}.yaml", entries)
        for jobs in ("1", "2"):
            out = tmp_path / f"{order}-{jobs}"
            cells = _run(registry, out, *CHECKS, "-j", jobs)
            changed = {name: (cells[name], solo[name]) for name in solo if cells[name] != solo[name]}
            assert not changed, f"{order} order, -j {jobs}: {changed}"
            _says_what_was_patched(out)


def _says_what_was_patched(out) -> None:
    """Every patcher's cells carry the change under ``metrics.torch_patched``, and the report says it."""
    matrix = json.loads((out / "matrix.json").read_text())
    for entry in (e for e in matrix["entries"] if e["name"] in PATCHERS):
        for cell in entry["cells"]:
            found = cell.get("metrics", {}).get("torch_patched", [])
            assert any(PATCHERS[entry["name"]] in sentence for sentence in found), (entry["name"], cell)
    report = render(read_matrix(out / "matrix.json"), width=200)
    assert ("function: importing tests.fixtures.patchers.function replaced torch.softmax: every model that imports it "
            "computes something else") in report

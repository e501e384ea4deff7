"""The sparse input keys (``layout``, ``density``): accepted, built, and refused with file, line and key path."""

from __future__ import annotations

import pytest

from audit.core.errors import RegistryError
from audit.registry.load import load_registry
from audit.registry.model import DEFAULT_DENSITY

HEAD = "version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs:\n"

# (one input's flow mapping, the value the problem points at, key path, words in the message)
BAD = [
    ("{shape: [3, 4], layout: dense}", "dense}", "entries[0].inputs[0].layout",
     "expected one of sparse_coo, sparse_csr"),
    ("{shape: [3, 4], layout: sparse_coo, density: 0}", "0}", "entries[0].inputs[0].density",
     "expected a value > 0, got 0"),
    ("{shape: [3, 4], layout: sparse_coo, density: 1.5}", "1.5}", "entries[0].inputs[0].density",
     "expected a value <= 1, got 1.5"),
    ("{shape: [2, 3, 4], layout: sparse_csr}", "sparse_csr}", "entries[0].inputs[0].layout",
     "expected a 2-D shape for sparse_csr (rows and columns), got 3 dims"),
    ("{shape: [], layout: sparse_coo}", "sparse_coo}", "entries[0].inputs[0].layout",
     "expected at least 1 dim for sparse_coo"),
    ("{shape: [3, 4], layout: sparse_coo, dtype: int64}", "sparse_coo,", "entries[0].inputs[0].layout",
     "expected a floating input for a sparse layout"),
    ("{shape: [3, 4], density: 0.5}", "0.5}", "entries[0].inputs[0].density",
     "expected density only with a sparse layout"),
]


def _load(tmp_path, inputs: str):
    path = tmp_path / "registry.yaml"
    path.write_text(HEAD + inputs)
    return load_registry(path)


@pytest.mark.parametrize("spec, value, path, words", BAD, ids=[b[3] for b in BAD])
def test_a_bad_sparse_key_names_file_line_key_and_what_was_expected(tmp_path, spec, value, path, words):
    line = f"      - {spec}\n"
    column = line.index(value) + 1
    with pytest.raises(RegistryError) as caught:
        _load(tmp_path, line)
    problem = caught.value.problems[0]
    assert (problem.line, problem.column, problem.path) == (7, column, path), str(problem)
    assert words in problem.message, problem.message
    assert str(problem).startswith(f"{tmp_path / 'registry.yaml'}:7:{column}: ")


def test_sparse_layouts_and_density_are_accepted_and_built(tmp_path):
    entry = _load(tmp_path, "      - {shape: [N, 3], layout: sparse_csr, density: 0.5}\n"
                            "      - {shape: [3, 2, 2], layout: sparse_coo}\n      - {shape: [2]}\n").entries[0]
    coo, csr, dense = entry.inputs[1], entry.inputs[0], entry.inputs[2]
    assert (csr.sparse_layout, csr.density) == ("sparse_csr", 0.5)
    assert (coo.sparse_layout, coo.density) == ("sparse_coo", DEFAULT_DENSITY)
    assert dense.sparse_layout is None and entry.sparse


def test_sparse_keys_are_accepted_in_defaults_too(tmp_path):
    path = tmp_path / "registry.yaml"
    path.write_text("version: 1\ndefaults:\n  inputs: [{shape: [3, 3], layout: sparse_coo, density: 1}]\n"
                    "entries:\n  - {name: a, owner: x, target: m:F}\n")
    assert load_registry(path).entries[0].inputs[0].density == 1.0

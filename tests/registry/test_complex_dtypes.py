"""Complex dtypes in the registry: accepted wherever a dtype is, a near miss still refused clearly, and every
dtype list of the schema being the one of audit.core.contract."""

from __future__ import annotations

import pytest

from audit.core.contract import DTYPE_ORDER
from audit.core.errors import RegistryError
from audit.registry.load import load_registry
from audit.kit.tolerance import Tolerance
from audit.registry.schema import schema

ENTRY = "version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [N]}]\n"


DEFAULT = Tolerance(atol=1.0, rtol=1.0)  # a check's own default, kept where the entry sets nothing


def _load(tmp_path, text):
    path = tmp_path / "registry.yaml"
    path.write_text(text)
    return load_registry(path)


def test_complex_dtypes_are_accepted_in_supports_tolerance_and_waivers(tmp_path):
    text = ENTRY + ("    supports: {dtypes: [complex128, complex64]}\n"
                    "    tolerance: {complex64: {atol: 1.0e-4, rtol: 1.0e-4}}\n"
                    "    expect: [{check: compile, status: fail, reason: r, dtype: complex64}]\n")
    (entry,) = _load(tmp_path, text).entries
    assert entry.supports.dtypes == ("complex128", "complex64")
    assert entry.tolerance_for("complex64", DEFAULT).atol == 1e-4


def test_a_complex_dtype_without_its_own_tolerance_takes_its_real_counterparts(tmp_path):
    text = ENTRY + ("    supports: {dtypes: [float32, complex64]}\n"
                    "    tolerance: {float32: {atol: 1.0e-3, rtol: 1.0e-3}}\n")
    (entry,) = _load(tmp_path, text).entries
    assert entry.tolerance_for("complex64", DEFAULT).atol == 1e-3
    assert entry.tolerance_for("complex128", DEFAULT) == DEFAULT


def test_a_complex_pin_makes_a_differentiable_input(tmp_path):
    (entry,) = _load(tmp_path, ENTRY.replace("[{shape: [N]}]", "[{shape: [N], dtype: complex64}]")).entries
    assert entry.inputs[0].differentiable


@pytest.mark.parametrize("where, text, words", [
    ("entries[0].supports.dtypes[0]", "    supports: {dtypes: [complex32]}\n", "got 'complex32'"),
    ("entries[0].tolerance.complex32", "    tolerance: {complex32: {atol: 1.0}}\n", "unknown key"),
])
def test_a_near_miss_is_still_a_clear_registry_error(tmp_path, where, text, words):
    with pytest.raises(RegistryError) as caught:
        _load(tmp_path, ENTRY + text)
    problem = caught.value.problems[0]
    assert problem.path == where, str(problem)
    assert words in problem.message and "complex128" in problem.message and "complex64" in problem.message


def test_every_dtype_list_of_the_schema_is_the_contracts():
    """The schema is a shipped JSON file: this keeps its dtype lists from drifting from audit.core.contract's."""
    lists = []

    def walk(node):
        if isinstance(node, dict):
            enum = node.get("enum")
            if isinstance(enum, list) and "float64" in enum:
                lists.append([d for d in enum if d in DTYPE_ORDER or d.startswith(("float", "bfloat", "complex"))])
            if isinstance(node.get("properties"), dict) and "float64" in node["properties"]:
                lists.append(list(node["properties"]))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema())
    assert len(lists) >= 6 and all(found == list(DTYPE_ORDER) for found in lists), lists

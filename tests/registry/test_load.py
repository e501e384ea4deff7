"""Loading registries: a table of bad ones, each with its message and line; defaults; no torch."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from audit.core.errors import RegistryError
from audit.registry.load import load_registry
from audit.kit.tolerance import Tolerance
from audit.registry.model import TensorSpec, ValueSpec

GOOD = """\
version: 1
defaults:
  owner: "@team"
  supports: {dtypes: [float64], double_backward: true}
entries:
  - name: cube
    target: mypkg.ops:Cube
    inputs:
      - shape: [B, 3]
        domain: [-2, 2]
        kinks: [0]
      - value: 1.5
    dims: {B: [0, 4]}
    supports: {forward_ad: true}
    expect:
      - {check: compile, status: fail, reason: "graph break, #123", until: 2027-03-01}
  - name: op
    kind: op
    owner: [a, b]
    target: ns::op.default
    inputs: [{shape: [N]}]
"""

# (registry text, line, column, key path, words in the message)
BAD = [
    ("version: 2\nentries: []\n", 1, 10, "version", "expected 1"),
    ("version: 1\nentries:\n  - name: a b\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n",
     3, 11, "entries[0].name", "letters, digits and . _ : -"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n    colour: red\n",
     7, 5, "entries[0].colour", "unknown key"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n"
     "    supports: {dtypes: [float128]}\n", 7, 25, "entries[0].supports.dtypes[0]", "expected one of float64"),
    ("version: 1\nentries:\n  - name: a\n    target: m:F\n    inputs: [{shape: [1]}]\n",
     3, 5, "entries[0]", "missing required key 'owner'"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    inputs: [{shape: [1]}]\n",
     3, 5, "entries[0]", "missing required key 'target'"),
    ("version: 1\nentries:\n  - {name: a, owner: x, target: m:F, inputs: [{shape: [1]}]}\n"
     "  - {name: a, owner: x, target: m:G, inputs: [{shape: [1]}]}\n", 4, 12, "entries[1].name", "duplicate name 'a'"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [B, M]}]\n"
     "    dims: {B: [1, 2]}\n", 6, 13, "entries[0].inputs", "dim 'M' is used in a shape but not ranged"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n"
     "    dims: {B: [3, 1]}\n", 7, 15, "entries[0].dims.B", "ranged but no input shape uses it"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    kind: op\n    target: m:F\n    inputs: [{shape: [1]}]\n",
     6, 13, "entries[0].target", "'namespace::name[.overload]'"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n"
     "    expect: [{check: gradchek, status: fail, reason: r}]\n", 7, 22, "entries[0].expect[0].check",
     "expected a check name"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n"
     "    expect: [{check: compile, status: fail, reason: r, until: 2027-02-30}]\n", 7, 63,
     "entries[0].expect[0].until", "real date"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n"
     "    mutates: [3]\n", 7, 15, "entries[0].mutates[0]", "index of a tensor input"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1], domain: [1, 0]}]\n",
     6, 35, "entries[0].inputs[0].domain", "low < high"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    owner: y\n", 5, 5, "entries[0].owner", "duplicate key"),
    ("version: 1\nentries: [\n", 3, 1, "", "invalid YAML"),
    ("- 1\n", 1, 1, "", "expected a mapping"),
    ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n"
     "    inputs: [{shape: [1], requires_grad: maybe}]\n",
     6, 42, "entries[0].inputs[0].requires_grad", "expected true or false, got 'maybe'"),
]


def _load(tmp_path, text):
    path = tmp_path / "registry.yaml"
    path.write_text(text)
    return load_registry(path)


@pytest.mark.parametrize("text, line, column, path, words", BAD, ids=[b[3] or b[4] for b in BAD])
def test_bad_registry_names_file_line_column_and_key(tmp_path, text, line, column, path, words):
    with pytest.raises(RegistryError) as caught:
        _load(tmp_path, text)
    problem = caught.value.problems[0]
    assert (problem.line, problem.column, problem.path) == (line, column, path), str(problem)
    assert words in problem.message
    assert str(problem).startswith(f"{tmp_path / 'registry.yaml'}:{line}:{column}: ")


def test_every_problem_is_reported_not_only_the_first(tmp_path):
    text = ("version: 1\nentries:\n  - name: a\n    owner: x\n    target: m:F\n    inputs: [{shape: [1]}]\n"
            "    supports: {vmapp: true}\n  - name: b\n    target: m:G\n    inputs: [{shape: [1]}]\n")
    with pytest.raises(RegistryError) as caught:
        _load(tmp_path, text)
    assert [p.line for p in caught.value.problems] == [7, 8]


def test_good_registry_merges_defaults(tmp_path):
    registry = _load(tmp_path, GOOD)
    cube, op = registry.entries
    assert cube.owners == ("@team",) and op.owners == ("a", "b")
    assert cube.supports.dtypes == ("float64",) and cube.supports.double_backward and cube.supports.forward_ad
    assert cube.inputs == (TensorSpec(shape=("B", 3), domain=(-2.0, 2.0), kinks=(0.0,)), ValueSpec(1.5))
    assert cube.dims == (("B", 0, 4),) and cube.may_be_empty
    assert cube.expect[0].until == "2027-03-01" and cube.line == 6
    assert op.kind == "op" and op.dim_range("N") == (1, 4) and not op.may_be_empty
    assert len(registry.sha256) == 64


def test_the_repositorys_own_registry_is_valid():
    assert len(load_registry("registry.yaml").entries) >= 4


def test_validate_does_not_import_torch(tmp_path):
    (tmp_path / "registry.yaml").write_text(GOOD)
    code = textwrap.dedent(f"""
        import sys
        from audit.cli import main
        sys.argv = ["audit", "validate", {str(tmp_path / 'registry.yaml')!r}]
        try:
            main()
        except SystemExit as exit:
            assert exit.code == 0, exit.code
        assert "torch" not in sys.modules, "validate imported torch"
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_a_schema_error_and_a_semantic_error_are_reported_together(tmp_path):
    path = tmp_path / "registry.yaml"
    path.write_text(textwrap.dedent("""\
        version: 1
        entries:
          - name: a
            owner: "@a"
            target: m:F
            inputs: [{shape: [N]}]
            supports: {vmapp: true}
            dims: {M: [1, 2]}
          - name: a
            owner: 3
            target: m:F
            inputs: [{shape: [N]}]
        """))
    with pytest.raises(RegistryError) as caught:
        load_registry(path)
    found = [(p.line, p.path) for p in caught.value.problems]
    assert (7, "entries[0].supports.vmapp") in found and (8, "entries[0].dims.M") in found
    assert (9, "entries[1].name") in found and (10, "entries[1].owner") in found


def test_numbers_in_exponent_form_are_numbers_as_in_yaml_1_2(tmp_path):
    # PyYAML alone reads `1e-3` (no dot) as a string: the registry would refuse `atol: 1e-3` as "not a number".
    text = GOOD.replace("    supports: {forward_ad: true}\n",
                        "    supports: {forward_ad: true}\n    tolerance: {float64: {atol: 1e-9, rtol: \"2E-6\"}}\n")
    path = tmp_path / "registry.yaml"
    path.write_text(text.replace('"2E-6"', "2E-6"))
    cube = load_registry(path).entries[0]
    assert cube.tolerance_for("float64", Tolerance(atol=1.0, rtol=1.0)) == Tolerance(atol=1e-9, rtol=2e-6)
    path.write_text(text)  # quoted, it stays the string it says it is, and the schema says so
    with pytest.raises(RegistryError, match=r"tolerance\.float64\.rtol: expected a number, got '2E-6'"):
        load_registry(path)

"""Layout and memory-safety checks: each catches its bug class and passes the correct twin."""

from __future__ import annotations

import pytest

from audit.results.outcome import HELD, VIOLATED
from tests.helpers import entry, observe

B = "tests.fixtures.broken"
L = "tests.fixtures.layout"
MATRIX = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [1, 3], "N": [1, 3]}}
CUBE = {**MATRIX, "reference": f"{B}:cube_reference"}

# (broken target, check, registry keys, words, correct twin)
CASES = [
    (f"{L}:ReadsAsContiguous", "noncontiguous", CUBE, "non-contiguous inputs", f"{B}:Cube"),
    (f"{L}:ViewsGrad", "noncontiguous", MATRIX, "grad_outputs", f"{L}:FlatGrad"),
    (f"{L}:ReturnsView", "alias", MATRIX, "shares storage with input 0", f"{L}:Identity"),
    (f"{L}:UndeclaredWrite", "alias", MATRIX, "modified input 0 in place", f"{B}:Cube"),
    (f"{L}:ScaleInPlaceUnmarked", "alias", {**MATRIX, "mutates": [0]}, "mark_dirty", f"{L}:ScaleInPlace"),
    (f"{L}:ScalesGradInPlace", "alias", MATRIX, "modified grad_output 0 in place", f"{B}:Cube"),
    (f"{L}:StashesInput", "saved_tensors", MATRIX, "outside save_for_backward", f"{L}:SavesOutput"),
    (f"{L}:Float32Math", "dtype", CUBE, "against the reference", f"{B}:Cube"),
    (f"{L}:Float32Output", "dtype", CUBE, "output 0 is float32", f"{B}:Cube"),
]


@pytest.mark.parametrize("broken, check, spec, words, twin", CASES, ids=[c[0].split(":")[1] for c in CASES])
def test_check_catches_its_bug(tmp_path, broken, check, spec, words, twin):
    found = observe(entry(tmp_path, target=broken, **spec), check)
    assert found.verdict == VIOLATED, found
    assert words in found.message


@pytest.mark.parametrize("broken, check, spec, words, twin", CASES,
                         ids=[c[4].split(":")[1] + "-" + c[1] for c in CASES])
def test_check_passes_the_correct_twin(tmp_path, broken, check, spec, words, twin):
    spec = {**spec, "mutates": spec.get("mutates", [])}
    found = observe(entry(tmp_path, target=twin, **spec), check)
    assert found.verdict == HELD, found.message


def test_declared_in_place_mutation_passes_alias(tmp_path):
    found = observe(entry(tmp_path, target=f"{L}:ScaleInPlace", mutates=[0], **MATRIX), "alias")
    assert found.verdict == HELD, found.message


def test_noncontiguous_failure_names_the_layout_and_shrinks(tmp_path):
    found = observe(entry(tmp_path, target=f"{L}:ReadsAsContiguous", **CUBE), "noncontiguous")
    assert found.case["layouts"][0] in ("transposed", "strided", "offset")
    assert f"input 0 {found.case['layouts'][0]}" in found.message


def test_dtype_probes_low_precision_as_unclaimed(tmp_path):
    from audit.checks import builtin
    from audit.engine.plan import claims, plan

    subject = entry(tmp_path, target=f"{B}:Cube", **CUBE)
    keys = [k for k in plan(subject, builtin()) if k.check == "dtype"]
    assert [k.dtype for k in keys] == ["float64", "float32", "float16", "bfloat16"]
    assert [claims(subject, builtin(), keys)[k] for k in keys] == [True, True, False, False]


def test_device_cuda_is_a_skip_without_cuda(tmp_path):
    import torch

    from audit.checks import builtin
    from audit.engine.cell import run_cell
    from audit.runtime.options import RunOptions
    from audit.results.outcome import SKIPPED, CellKey
    from audit.runtime.target import resolve
    from tests.helpers import ROOT

    if torch.cuda.is_available():
        pytest.skip("CUDA is present: the skip path is not reachable here")
    subject = entry(tmp_path, target=f"{B}:Cube", supports={"devices": ["cpu", "cuda"]}, **CUBE)
    found = run_cell(subject, resolve(subject, ROOT), builtin()["device"], CellKey("device", "float64", "cuda"),
                     RunOptions(base=str(ROOT)), True)
    assert found.verdict == SKIPPED and "CUDA is not available" in found.message


@pytest.mark.gpu
def test_device_cuda_matches_cpu(tmp_path):
    import torch

    from audit.checks import builtin
    from audit.engine.cell import run_cell
    from audit.runtime.options import RunOptions
    from audit.results.outcome import CellKey
    from audit.runtime.target import resolve
    from tests.helpers import ROOT

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.is_available() is False on this machine")
    subject = entry(tmp_path, target=f"{B}:Cube", supports={"devices": ["cpu", "cuda"]}, **CUBE)
    found = run_cell(subject, resolve(subject, ROOT), builtin()["device"], CellKey("device", "float64", "cuda"),
                     RunOptions(base=str(ROOT)), True)
    assert found.verdict == HELD, found.message


OPS = {"kind": "op", "load": ["tests.fixtures.ops"]}


def test_op_schema_and_registry_must_agree_on_mutation(tmp_path):
    spec = {**OPS, "target": "audit_tests::scale_into",
            "inputs": [{"shape": ["N"]}, {"shape": ["N"], "requires_grad": False}]}
    found = observe(entry(tmp_path, **spec), "alias")
    assert found.verdict == VIOLATED and "marks arguments [1] as mutable" in found.message
    assert observe(entry(tmp_path, mutates=[1], **spec), "alias").verdict == HELD


def test_op_that_writes_an_argument_its_schema_calls_immutable_fails(tmp_path):
    spec = {**OPS, "inputs": [{"shape": ["N"], "requires_grad": False}]}
    found = observe(entry(tmp_path, target="audit_tests::sneaky_scale", **spec), "alias")
    assert found.verdict == VIOLATED and "its schema does not mark it mutable" in found.message
    assert observe(entry(tmp_path, target="audit_tests::double", **spec), "alias").verdict == HELD


# The replay scripts of these bugs (exit 1, twin exit 0): tests/test_replay.py.

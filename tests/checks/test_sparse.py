"""Sparse inputs (layout: sparse_coo | sparse_csr): drawn with their pattern, rebuilt exactly by replay scripts,
checked with masked semantics; a gradient in the wrong layout, outside the pattern or with wrong values fails with
a clear message (replayed: tests/replay/sparse.py); checks that cannot apply skip and say why; the correct
sparse-dense matmul holds everywhere else."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, seed, settings

from audit.checks import builtin
from audit.engine.script import _rendered, kit_source
from audit.inputs.case import Case, TensorArg
from audit.inputs.strategies import patterns
from audit.results.outcome import HELD, SKIPPED, VIOLATED
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry, observe

S = "tests.fixtures.sparse_ops"
DIMS = {"M": [1, 3], "K": [1, 3], "N": [1, 3]}


def _matmul(tmp_path, target: str, layout: str = "sparse_coo", **more):
    return entry(tmp_path, target=f"{S}:{target}", reference=f"{S}:dense_matmul_reference", dims=DIMS,
                 inputs=[{"shape": ["M", "K"], "layout": layout}, {"shape": ["K", "N"]}], **more)


#: Checks that run on a sparse entry, each with the dtypes it runs in (the rest skip, or have no cell).
RUNS = ("forward", "gradcheck", "undefined_grad", "determinism", "dtype", "device", "checkpoint", "partial_grad")


@pytest.mark.parametrize("layout", ["sparse_coo", "sparse_csr"])
def test_the_correct_sparse_dense_matmul_holds_every_check_that_runs(tmp_path, layout):
    correct = _matmul(tmp_path, "SparseDenseMatmul", layout)
    for check in RUNS:
        for dtype in ("float64", "float32") if check in ("forward", "dtype") else ("float64",):
            found = observe(correct, check, dtype, examples=3)
            assert found.verdict == HELD, f"{check} {dtype}: {found.message}"


def test_every_check_that_cannot_apply_to_sparse_inputs_skips_and_says_why(tmp_path):
    correct = _matmul(tmp_path, "SparseDenseMatmul")
    skipping = [name for name, check in builtin().items() if check.not_for_sparse]
    assert {"gradgradcheck", "noncontiguous", "vmap", "compile", "export", "alias"} <= set(skipping)
    for name in skipping:
        found = observe(correct, name, examples=2)
        assert found.verdict == SKIPPED, f"{name}: {found.verdict} {found.message}"
        assert found.message.startswith("not applicable to sparse inputs (input 0 (sparse_coo)): "), found.message


def test_a_check_that_skips_sparse_inputs_still_runs_on_a_dense_entry(tmp_path):
    dense = entry(tmp_path, target="tests.fixtures.broken:Cube", inputs=[{"shape": [2, 3]}])
    assert observe(dense, "noncontiguous", examples=2).verdict == HELD


@pytest.mark.parametrize("bug, layout, words", [
    ("DenseGradient", "sparse_coo", "gradient of sparse input 0 came back strided (dense), expected sparse_coo "
                                    "(the input's layout); return a sparse_coo gradient with the input's pattern"),
    ("DenseGradient", "sparse_csr", "came back strided (dense), expected sparse_csr"),
    ("WidePatternGradient", "sparse_coo", "nonzero value(s) outside the input's pattern"),
    ("MultipliedGradient", "sparse_csr", "torch.autograd.gradcheck (masked: unspecified elements of sparse inputs "
                                         "ignored): Jacobian mismatch"),
    ("Float32Gradient", "sparse_coo", "against the reference's autograd gradient"),
])
def test_gradcheck_catches_a_wrong_gradient_of_a_sparse_input(tmp_path, bug, layout, words):
    found = observe(_matmul(tmp_path, bug, layout), "gradcheck", examples=10)
    assert found.verdict == VIOLATED and words in found.message, found.message
    assert layout in found.message  # the shrunk case names the input's layout and pattern


def test_a_sparse_output_is_checked_through_to_dense(tmp_path):
    """torch's gradcheck refuses sparse outputs ("call to_dense(masked_grad=...)"): the audit densifies them."""
    spec = {"inputs": [{"shape": ["M", "K"], "layout": "sparse_coo"}], "dims": {"M": [1, 3], "K": [1, 3]}}
    assert observe(entry(tmp_path, target=f"{S}:SparseScale", **spec), "gradcheck", examples=3).verdict == HELD
    found = observe(entry(tmp_path, target=f"{S}:SparseScaleForgetsFactor", **spec), "gradcheck", examples=3)
    assert found.verdict == VIOLATED and "Jacobian mismatch" in found.message, found.message


def test_masked_gradcheck_accepts_a_dense_gradient_in_fast_mode_so_the_layout_is_checked_first():
    """Why the layout rule exists: torch's masked gradcheck (fast mode) and autograd both take a dense gradient."""
    from tests.fixtures.sparse_ops import DenseGradient

    a = torch.sparse_coo_tensor([[0, 1], [1, 0]], [1.0, 2.0], (2, 2), dtype=torch.float64).requires_grad_()
    b = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(DenseGradient.apply, (a, b), masked=True, fast_mode=True,
                                    check_undefined_grad=False)


def _sparse_case() -> Case:
    values = np.array([[0.5, -0.25, 0.0], [1.0, 0.125, -1.0]])
    pattern = np.array([[True, False, True], [False, True, True]])
    return Case(dims=(), args=(TensorArg(values, True, None, "sparse_csr", pattern), TensorArg(values.T.copy(), True)))


def test_a_sparse_case_round_trips_through_json_with_its_layout_and_pattern():
    case = _sparse_case()
    back = Case.from_json(case.to_json())
    assert back.args[0].sparse_layout == "sparse_csr" and back.args[1].sparse_layout is None
    assert np.array_equal(back.args[0].pattern, case.args[0].pattern)
    assert "[2, 3] sparse_csr (4 of 6 specified)" in back.describe()


def test_a_replay_script_rebuilds_the_sparse_input_exactly(tmp_path):
    case = _sparse_case()
    correct = _matmul(tmp_path, "SparseDenseMatmul", "sparse_csr")
    audited = Subject(correct, resolve(correct, ROOT), "float64", "cpu").args(case)[0]
    scope = {"torch": torch, "dtype": torch.float64, "device": "cpu"}
    exec(kit_source() + "\nargs = [\n" + "\n".join(_rendered(case, "float64")) + "\n]", scope)  # the kit: sparse_from
    rebuilt = scope["args"][0]
    assert rebuilt.layout == audited.layout == torch.sparse_csr and rebuilt.requires_grad
    for part in ("crow_indices", "col_indices", "values"):
        assert torch.equal(getattr(rebuilt, part)(), getattr(audited, part)()), part
    assert audited.values().tolist() == [0.5, 0.0, 0.125, -1.0]  # an explicit zero stays specified


def test_patterns_keep_the_density_and_never_specify_nothing():
    drawn = []

    @seed(0)
    @settings(max_examples=20, database=None, deadline=None)
    @given(patterns((6, 5), 0.3), patterns((3, 1), 0.01))
    def draw(wide, narrow):
        assert wide.dtype == bool and wide.shape == (6, 5) and narrow.sum() >= 1
        drawn.append(wide.mean())

    draw()
    assert 0.2 < np.mean(drawn) < 0.4, drawn  # each element specified with chance 0.3


def test_audit_repro_prints_a_sparse_input_by_its_indices_and_values(tmp_path):
    from audit.commands.repro import describe_inputs

    correct = _matmul(tmp_path, "SparseDenseMatmul", "sparse_csr")
    text = describe_inputs(Subject(correct, resolve(correct, ROOT), "float64", "cpu").args(_sparse_case()))
    assert "input 0: torch.float64 sparse_csr shape [2, 3] (4 specified)" in text, text
    assert "indices [[0, 0], [0, 2], [1, 1], [1, 2]]" in text and "values [0.5, 0.0, 0.125, -1.0]" in text, text

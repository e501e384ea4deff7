"""Complex entries: inputs drawn with real and imaginary parts, PyTorch's gradient convention, complex
cotangents and comparisons, and every check that makes sense for complex running (the others saying why not)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from torch.autograd.gradcheck import GradcheckError

from audit.catalog import checks as catalog
from audit.catalog.interface import numeric_dtypes
from audit.engine.script import _arg
from audit.inputs.case import Case, TensorArg
from audit.inputs.strategies import cases
from audit.kit.tolerance import Tolerance
from audit.registry.model import Entry, Supports, TensorSpec
from audit.results.outcome import HELD, SKIPPED, VIOLATED
from audit.kit.autograd import grad_outputs
from audit.kit.compare import mismatch
from audit.kit.explain import explain_gradcheck_failure
from audit.toolkit.jacobian import gradcheck_options
from tests.helpers import entry, observe

X = "tests.fixtures.complex_ops:"
COMPLEX = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, "supports": {"dtypes": ["complex128", "complex64"]}}
FILTER = {"target": "examples.complex_filter:SpectralFilter", "reference": "examples.complex_filter:reference",
          "inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 3], "N": [1, 4]}, "batch": "B",
          "supports": {"dtypes": ["complex128", "complex64"], "double_backward": True, "forward_ad": True,
                       "vmap": True, "compile": True, "export": True}}
DRAWN = Entry(name="c", owners=("@o",), kind="function", target="m:F", dims=(("N", 1, 4),),
              inputs=(TensorSpec(("N",), domain=(2.0, 3.0)),), supports=Supports(dtypes=("complex128",)))
FAST = settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def test_a_conjugated_gradient_fails_gradcheck_naming_the_convention(tmp_path):
    bug = observe(entry(tmp_path, target=f"{X}ConjugatedAbsSquared", **COMPLEX), "gradcheck", "complex128", examples=5)
    assert bug.verdict == VIOLATED
    assert "looks conjugated" in bug.message and "conjugate Wirtinger" in bug.message, bug.message
    twin = observe(entry(tmp_path, target=f"{X}AbsSquared", **COMPLEX), "gradcheck", "complex128", examples=5)
    assert twin.verdict == HELD, twin.message


@pytest.mark.parametrize("bug, twin, spec, dtype", [
    ("HermitianSpectrum", "Spectrum", {"inputs": [{"shape": ["N"]}], "dims": {"N": [2, 6]}}, "float64"),
    ("ForwardTransformPower", "SpectralPower", {**COMPLEX, "dims": {"N": [2, 6]}}, "complex128"),
], ids=["real-to-complex", "complex-to-real"])
def test_fft_adjoint_bugs_fail_and_their_twins_pass(tmp_path, bug, twin, spec, dtype):
    found = observe(entry(tmp_path, target=f"{X}{bug}", **spec), "gradcheck", dtype, examples=5)
    assert found.verdict == VIOLATED and "Jacobian mismatch" in found.message
    assert "conjugated" not in found.message  # a wrong adjoint is not a convention slip
    assert observe(entry(tmp_path, target=f"{X}{twin}", **spec), "gradcheck", dtype, examples=5).verdict == HELD


@pytest.mark.parametrize("check, dtype", [
    ("forward", "complex64"), ("gradcheck", "complex128"), ("gradgradcheck", "complex128"),
    ("forward_ad", "complex128"), ("dtype", "complex64"), ("noncontiguous", "complex128"), ("alias", "complex128"),
    ("saved_tensors", "complex128"), ("vmap", "complex128"), ("shared_grad", "complex128"),
])
def test_correct_complex_code_passes_every_check_that_applies(tmp_path, check, dtype):
    found = observe(entry(tmp_path, **FILTER), check, dtype, examples=3)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("check, dtype, words", [("autocast", "complex64", "only real floating"),
                                                 ("distributed", "complex128", "complex entries are not covered")])
def test_checks_that_do_not_apply_to_complex_say_why(tmp_path, check, dtype, words):
    found = observe(entry(tmp_path, **{**FILTER, "supports": {**FILTER["supports"], check: True}}), check, dtype,
                    examples=1)
    assert found.verdict == SKIPPED and words in found.message, found.message


def test_a_complex_entry_is_judged_in_complex128_without_half_precision_probes(tmp_path):
    complex_only = entry(tmp_path, target=f"{X}AbsSquared", **COMPLEX)
    assert numeric_dtypes(complex_only) == ("complex128",)
    assert catalog.CATALOG["dtype"].dtypes(complex_only) == ("complex128", "complex64")
    assert catalog.CATALOG["autocast"].dtypes(complex_only) == ("complex64",)
    mixed = entry(tmp_path, target=f"{X}AbsSquared", **{**COMPLEX, "supports": {"dtypes": ["float32", "complex64"]}})
    assert "float16" in catalog.CATALOG["dtype"].dtypes(mixed) and numeric_dtypes(mixed) == ("float32",)


def test_a_real_to_complex_output_keeps_the_input_precision(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [2, 6]}}  # rfft: float32 in, complex64 out
    assert observe(entry(tmp_path, target=f"{X}Spectrum", **spec), "dtype", "float32", examples=3).verdict == HELD


@FAST
@given(cases(DRAWN))
def test_complex_inputs_draw_both_parts_in_the_domain_and_round_trip_exactly(case):
    values = case.args[0].values
    assert np.iscomplexobj(values)
    assert np.all((values.real >= 2) & (values.real <= 3) & (values.imag >= 2) & (values.imag <= 3))
    again = Case.from_json(case.to_json()).args[0].values
    assert np.array_equal(again, values) and np.iscomplexobj(again)


def test_a_script_rebuilds_complex_values_exactly_signed_zeros_included():
    values = np.array([complex(1.5, -0.0), complex(-2.0, -0.0), 0.1 + 0.3j])
    rebuilt = eval(_arg(TensorArg(values=values, requires_grad=True), "complex128"),
                   {"torch": torch, "dtype": torch.complex128, "device": "cpu"})
    assert rebuilt.dtype == torch.complex128 and rebuilt.requires_grad
    assert torch.equal(torch.view_as_real(rebuilt.detach()), torch.view_as_real(torch.from_numpy(values)))
    assert torch.signbit(rebuilt.imag).tolist() == [True, True, False]
    with warnings.catch_warnings():  # a real cell renders the real parts (no "discards the imaginary part")
        warnings.simplefilter("error")
        real = eval(_arg(TensorArg(values=values, requires_grad=False), "float64"),
                    {"torch": torch, "dtype": torch.float64, "device": "cpu"})
    assert real.tolist() == [1.5, -2.0, 0.1]


def test_complex_outputs_get_complex_cotangents_and_comparisons_see_imaginary_parts():
    (cotangent,) = grad_outputs([torch.zeros(8, dtype=torch.complex64)], seed=0)
    assert cotangent.dtype == torch.complex64 and bool(cotangent.imag.abs().gt(0).any())
    got, expected = torch.tensor([1 + 1j]), torch.tensor([1 + 2j])
    assert "max |got - expected| = 1" in mismatch(got, expected, Tolerance(atol=1e-5, rtol=1e-5))


def test_fast_mode_on_a_large_complex_input_passes_the_twin_and_names_the_convention(tmp_path):
    from types import SimpleNamespace

    from tests.fixtures.complex_ops import AbsSquared, ConjugatedAbsSquared

    cell = SimpleNamespace(dtype="complex128", entry=entry(tmp_path, target=f"{X}AbsSquared", **COMPLEX))
    z = torch.randn(1100, dtype=torch.complex128, generator=torch.Generator().manual_seed(0)).requires_grad_()
    options = gradcheck_options(cell, [z])
    assert options["fast_mode"]
    assert torch.autograd.gradcheck(AbsSquared.apply, (z,), **options)  # no false alarm at the scaled tolerance
    said = GradcheckError("Jacobian mismatch for output 0 with respect to input 0,")  # what fast mode raises on the bug
    assert "conjugate Wirtinger" in explain_gradcheck_failure(ConjugatedAbsSquared.apply, [z], said, options)


def test_a_pinned_complex_input_of_a_real_entry_gets_a_complex_gradient(tmp_path):
    pinned = entry(tmp_path, target=f"{X}AbsSquared", inputs=[{"shape": ["N"], "dtype": "complex128"}],
                   dims={"N": [1, 3]})
    for check in ("gradcheck", "dtype"):
        found = observe(pinned, check, "float64", examples=3)
        assert found.verdict == HELD, found.message

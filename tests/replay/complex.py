"""Planted bugs replayed: complex Functions (tests/fixtures/complex_ops.py): PyTorch's gradient convention,
real-to-complex and complex-to-real FFT adjoints, and complex precision.

Specs are those of tests/checks/test_complex.py; their scripts rebuild complex inputs from their real and
imaginary parts and draw complex cotangents for complex outputs, as the audit does."""

from __future__ import annotations

from tests.replay import Planted

X = "tests.fixtures.complex_ops:"

COMPLEX = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, "supports": {"dtypes": ["complex128", "complex64"]}}
SIGNAL = {"inputs": [{"shape": ["N"]}], "dims": {"N": [2, 6]}, "reference": f"{X}spectrum_reference"}
POWER = {**COMPLEX, "dims": {"N": [2, 6]}, "reference": f"{X}spectral_power_reference"}
FILTER = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 3], "N": [1, 6]}, "batch": "B",
          "supports": {"dtypes": ["complex128", "complex64"], "forward_ad": True, "vmap": True}}

ROWS: list[Planted] = [
    Planted(f"{X}ConjugatedAbsSquared", "gradcheck", {**COMPLEX, "reference": f"{X}abs_squared_reference"},
            f"{X}AbsSquared", "conjugate Wirtinger", dtype="complex128"),
    Planted(f"{X}AbsSquaredInComplex64", "dtype", {**COMPLEX, "reference": f"{X}abs_squared_reference"},
            f"{X}AbsSquared", "against the reference", dtype="complex128"),
    Planted(f"{X}HermitianSpectrum", "gradcheck", SIGNAL, f"{X}Spectrum", "Jacobian mismatch"),
    Planted(f"{X}ForwardTransformPower", "gradcheck", POWER, f"{X}SpectralPower", "Jacobian mismatch",
            dtype="complex128"),
    # jacrev differences complex tensors as real views: the vmap check catches the convention too
    Planted(f"{X}ConjugatedFilter", "vmap", FILTER, "examples.complex_filter:SpectralFilter", "jacrev",
            dtype="complex128"),
]

_REFERENCE = "a reference (the composite the target is compared with), not a target: nothing of its own to replay"

#: fixture name ("module:Name") -> why it has no row
NOT_REPLAYED: dict[str, str] = {
    f"{X}abs_squared_reference": _REFERENCE,
    f"{X}spectrum_reference": _REFERENCE,
    f"{X}spectral_power_reference": _REFERENCE,
}

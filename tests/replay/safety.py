"""Planted bugs replayed: memory safety (alias, saved_tensors), layouts and dtypes, in-place and stochastic
Functions, the correct-shape twins of issue 15, and empty, undefined_grad and forward_ad.

Specs are those of the check tests (tests/checks/test_layout_corpus.py, test_inplace_stochastic.py,
test_false_alarms.py, test_corpus.py)."""

from __future__ import annotations

from tests.replay import Planted

B, L, S, C = ("tests.fixtures.broken:", "tests.fixtures.layout:", "tests.fixtures.inplace_stochastic:",
              "tests.fixtures.correct_shapes:")

MATRIX = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [1, 3], "N": [1, 3]}}
CUBE = {**MATRIX, "reference": f"{B}cube_reference"}
# In place and stochastic: at least 16 elements, 2-d (see test_inplace_stochastic.py).
LARGE = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [4, 6], "N": [4, 6]}}
IN_PLACE = {**LARGE, "mutates": [0]}
EXP = {**IN_PLACE, "reference": f"{S}exp_reference", "supports": {"double_backward": True}}
NOISE = {"inputs": [{"shape": ["M", "N"]}, {"shape": ["M", "N"]}], "dims": LARGE["dims"],
         "supports": {"deterministic": False}, "reference": f"{S}reparameterised_reference"}
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [2, 5]}}
ROWS_W = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
SINGLE = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 5]}, "reference": f"{B}cube_reference"}

ROWS: list[Planted] = [
    # tests/fixtures/layout.py
    Planted(f"{L}ReadsAsContiguous", "noncontiguous", CUBE, f"{B}Cube", "non-contiguous inputs"),
    Planted(f"{L}ViewsGrad", "noncontiguous", MATRIX, f"{L}FlatGrad", "grad_outputs"),
    Planted(f"{L}ReturnsView", "alias", MATRIX, f"{L}Identity", "shares storage with input 0"),
    Planted(f"{L}UndeclaredWrite", "alias", MATRIX, f"{B}Cube", "modified input 0 in place"),
    Planted(f"{L}ScaleInPlaceUnmarked", "alias", {**MATRIX, "mutates": [0]}, f"{L}ScaleInPlace", "mark_dirty"),
    Planted(f"{L}ScalesGradInPlace", "alias", MATRIX, f"{B}Cube", "modified grad_output 0 in place"),
    Planted(f"{L}StashesInput", "saved_tensors", MATRIX, f"{L}SavesOutput", "outside save_for_backward"),
    Planted(f"{L}Float32Math", "dtype", CUBE, f"{B}Cube", "against the reference"),
    Planted(f"{L}Float32Output", "dtype", CUBE, f"{B}Cube", "output 0 is float32"),
    # a float64 input, a float32 output: the forward script compares in float64, as the check does
    Planted(f"{L}Float32Output", "forward", CUBE, f"{B}Cube", "max |got - expected|"),
    # tests/fixtures/inplace_stochastic.py
    Planted(f"{S}ScaleInPlaceWrongGrad", "gradcheck", IN_PLACE, f"{S}ScaleInPlace", "Jacobian mismatch"),
    Planted(f"{S}ScaleInPlaceUnmarked", "alias", IN_PLACE, f"{S}ScaleInPlace", "mark_dirty"),
    Planted(f"{S}ExpInPlaceStashed", "saved_tensors", EXP, f"{S}ExpInPlace", "outside save_for_backward"),
    Planted(f"{S}NoiseGradDoubled", "gradcheck", NOISE, f"{S}Reparameterised", "with respect to input 1"),
    Planted(f"{S}NoiseGradForgotten", "gradcheck", NOISE, f"{S}Reparameterised", "with respect to input 1"),
    Planted(f"{S}TwiceTheNoise", "forward", NOISE, f"{S}Reparameterised", "max |got - expected|"),
    # tests/fixtures/correct_shapes.py
    Planted(f"{C}ReturnsInput", "alias", VECTOR, f"{B}Cube", "input 0 changed: max |delta| = 1;"),
    Planted(f"{C}MulReturnsInput", "alias", ROWS_W, f"{B}RowScale",
            "update of the gradient of input 1 (grad += 1, as accumulation or in-place clipping does), input 0 "
            "changed"),
    Planted(f"{C}GradIntoInput", "alias", VECTOR, f"{B}Cube", "backward modified input 0 in place"),
    Planted(f"{C}ReusedGradBuffer", "alias", VECTOR, f"{B}Cube",
            "when the next call (forward and backward) ran with other cotangents"),
    Planted(f"{C}CtxWorkspace", "alias", VECTOR, f"{B}Cube",
            "when a second backward through the same graph (retain_graph=True) ran"),
    Planted(f"{C}CachedZeroGrad", "alias", VECTOR, f"{C}Round", "the next call gives a different result"),
    Planted(f"{C}CtxZeroGrad", "alias", VECTOR, f"{C}Round",
            "a second backward through the same graph gives a different result"),
    Planted(f"{C}DetachedSavedInput", "gradgradcheck", {**VECTOR, "supports": {"double_backward": True}},
            f"{B}Cube", "Jacobian mismatch for output 0 with respect to input 0;"),
    # tests/fixtures/broken.py, and a silent undefined_grad bug (tests/fixtures/replay_safety.py)
    Planted(f"{B}CrashOnEmpty", "empty", {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [0, 3], "N": [1, 3]}},
            f"{B}SumRows", "IndexError"),
    Planted(f"{B}NeedsAllGrads", "undefined_grad",
            {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, "reference": f"{B}two_outputs_reference"},
            f"{B}TwoOutputs", "alone"),
    Planted("tests.fixtures.replay_safety:UndefinedAsOnes", "undefined_grad",
            {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, "reference": f"{B}two_outputs_reference"},
            f"{B}TwoOutputs", "backward through output 1 alone: gradient of input 0"),
    Planted(f"{B}WrongJvp", "forward_ad", {**SINGLE, "supports": {"forward_ad": True}}, f"{B}CubeJvp",
            "forward-mode AD: Jacobian mismatch for output 0 with respect to input 0: max |jvp - numeric|"),
    Planted(f"{B}RoundedJvp", "forward_ad", {**SINGLE, "supports": {"forward_ad": True}}, f"{B}CubeJvp",
            "against the reference's forward-mode AD"),
    Planted("tests.fixtures.vocabulary:CubeBareJvp", "forward_ad", {**SINGLE, "supports": {"forward_ad": True}},
            f"{B}CubeJvp", "no forward-mode formula"),
]

_CORRECT_ONLY = ("a correct Function of issue 15 (tests/checks/test_false_alarms.py) that no planted bug is a "
                 "variant of: it has no failure to replay; the false-alarm tests require it to pass")
_REFERENCE = "a reference (the composite the target is compared with), not a target: nothing of its own to replay"

#: fixture name ("module:Name") -> why it has no row (a reference, a helper, a correct-only fixture...)
_ISOLATION = ("correct code the run-isolation tests (tests/engine/test_patched_torch.py, test_jit_caches.py) place "
              "beside hostile neighbours or concurrent compiles: no bug, no failing cell to replay")
NOT_REPLAYED: dict[str, str] = {
    **{f"tests.fixtures.jit_cache:{name}": _ISOLATION for name in ("load", "Scale", "ScaleAgain")},
    **{f"tests.fixtures.patched_neighbours:{name}": _ISOLATION
       for name in ("Softmax", "by_torch", "by_method", "by_functional", "by_module")},
    f"{L}exp_reference": _REFERENCE,
    f"{S}exp_reference": _REFERENCE,
    f"{S}reparameterised_reference": _REFERENCE,
    f"{S}dropout": "correct stochastic code drawn inside torch (tests/checks/test_inplace_stochastic.py requires "
                   "it to pass); no planted bug is a variant of it, so it has no failure to replay",
    **{f"{C}{name}": _CORRECT_ONLY for name in ("AddBias", "Add", "Concat", "Split", "Permute", "Scale", "SumAll")},
}

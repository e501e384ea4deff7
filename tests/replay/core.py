"""Planted bugs replayed: gradient bugs (tests/fixtures/broken.py), bugs that show only with some inputs frozen
or across a batch (partial.py), and gradient bugs beside points without a derivative (smoothness.py)."""

from __future__ import annotations

from tests.replay import Planted

B, P, S = "tests.fixtures.broken", "tests.fixtures.partial", "tests.fixtures.smoothness"
CUBE = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 5]}, "reference": f"{B}:cube_reference"}
ROWS_SHAPE = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}
MATMUL = {"inputs": [{"shape": ["M", "K"]}, {"shape": ["K", "N"]}], "dims": {"M": [1, 3], "K": [1, 3], "N": [1, 3]}}
DOUBLE = {**CUBE, "supports": {"double_backward": True}}
TWO = {"inputs": [{"shape": ["N"]}, {"shape": ["N"]}], "dims": {"N": [1, 4]}}
BATCH = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 3]},
         "batch": "B"}
LAYER = {"kind": "module", "inputs": [{"shape": ["B", 3]}], "dims": {"B": [1, 3]}, "batch": "B"}
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
DIRECTION = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "reference": f"{S}:direction_reference"}

ROWS = [
    Planted(f"{B}:WrongSign", "gradcheck", CUBE, f"{B}:Cube", "Jacobian mismatch"),
    Planted(f"{B}:WrongConstant", "gradcheck", CUBE, f"{B}:Cube", "max |analytic - numeric|"),
    Planted(f"{B}:WrongWhenBatched", "gradcheck", ROWS_SHAPE, f"{B}:RowScale", "with B="),
    Planted(f"{B}:WrongWhenSquare", "gradcheck", MATMUL, f"{B}:Matmul", "Jacobian mismatch"),
    Planted(f"{B}:Float32Backward", "gradcheck", CUBE, f"{B}:Cube", "reference's autograd gradient"),
    Planted(f"{B}:DetachedBackward", "gradgradcheck", DOUBLE, f"{B}:Cube", "does not require grad"),
    Planted(f"{B}:OnceDifferentiable", "gradgradcheck", DOUBLE, f"{B}:Cube", "once_differentiable"),
    Planted(f"{B}:WrongForward", "forward", CUBE, f"{B}:Cube", "max |got - expected|"),
    Planted(f"{P}:UnboundWhenAlone", "partial_grad", TWO, f"{P}:MulAdd", "UnboundLocalError"),
    Planted(f"{P}:SkipsTermWhenAlone", "partial_grad", TWO, f"{P}:MulAdd", "with only input 1 requiring grad"),
    Planted(f"{P}:UnboundAndWrongSign", "partial_grad", TWO, f"{P}:MulAdd", "UnboundLocalError"),
    Planted(f"{P}:ScaleShiftMeanZeroRows", "shared_grad", BATCH, f"{P}:ScaleShift"),
    Planted(f"{P}:ScaleShiftMean", "shared_grad", BATCH, f"{P}:ScaleShift", "sum of its 2 per-sample gradients"),
    Planted(f"{P}:Centered", "shared_grad", BATCH, f"{P}:ScaleShift", "sample 0 of 2: output"),
    Planted(f"{P}:scale_shift_mean_layer", "shared_grad", LAYER, f"{P}:scale_shift_layer",
            "gradient of parameter 'b'"),
    Planted(f"{S}:MaskedSin", "gradcheck", VECTOR, f"{S}:Sin", "Jacobian mismatch"),
    Planted(f"{S}:WrongAbs", "gradcheck", VECTOR, f"{S}:Abs", "Jacobian mismatch"),
    Planted(f"{S}:WrongSecondDerivative", "gradgradcheck", {**VECTOR, "supports": {"double_backward": True}},
            f"{B}:Cube"),
    Planted(f"{S}:DirectionWrongAway", "forward", DIRECTION, f"{S}:Direction", "max |got - expected|"),
]

#: fixture name ("module:Name") -> why it has no row of its own
NOT_REPLAYED: dict[str, str] = {
    "tests.fixtures.hostile:Speechless": "attacks the audit's messages (exceptions without one): test_speechless.py",
    "tests.fixtures.hostile:SpeechlessOnLayout": "attacks the audit's messages (exceptions without one): "
                                                 "test_speechless.py",
    "tests.fixtures.two_bugs:TwoBugs": "two failures in one cell: both scripts (exit 1) and the twin's (exit 0) run "
                                       "in tests/engine/test_distinct_failures.py",
    "tests.fixtures.two_bugs:FastPathWrong": "the one-failure control of test_distinct_failures.py",
    "tests.fixtures.two_bugs:CubeFastPath": "correct: the twin of TwoBugs and FastPathWrong",
    f"{B}:cube_reference": "a reference, not a target",
    f"{B}:two_outputs_reference": "a reference, not a target",
    f"{B}:CubeJvp": "correct: WrongJvp's twin (in safety.py's table)",
    f"{B}:SumRows": "correct: CrashOnEmpty's twin (in safety.py's table)",
    f"{B}:TwoOutputs": "correct: NeedsAllGrads's twin (in safety.py's table)",
    f"{S}:Relu": "correct at its kink: a false-alarm fixture (test_smoothness), nothing fails to replay",
    f"{S}:ReluAtZeroOne": "correct (another subgradient at 0): a false-alarm fixture, nothing fails to replay",
    f"{S}:relu_reference": "a reference, not a target",
    f"{S}:SymEigvals": "correct where eigenvalues are distinct: a false-alarm fixture, nothing fails",
    f"{S}:SquaredNorm": "correct: a 0-d output fixture, nothing fails to replay",
    f"{S}:HalfSquaredRelu": "correct (second derivative undefined only at 0): a false-alarm fixture",
    f"{S}:HingeDiff": "correct at a tie between entries: a false-alarm fixture",
    f"{S}:hinge_reference": "a reference, not a target",
    f"{S}:direction_reference": "a reference, not a target",
}

"""Planted intended-gradient bugs whose intended gradient is a rule of its own (tests/fixtures/intended_vjp.py):
guided backpropagation, a lower bound that passes the gradient toward it, and LSQ's learned step size, each judged
against its declared VJP (``vjp:``); their scripts compare with the declared VJP as the audit does."""

from __future__ import annotations

from tests.replay import Planted

V = "tests.fixtures.intended_vjp"
GUIDED = {"inputs": [{"shape": ["N"], "domain": [-2, 2], "kinks": [0]}], "dims": {"N": [1, 8]},
          "reference": "torch:relu", "vjp": f"{V}:guided_relu_vjp"}
BOUND = {"inputs": [{"shape": ["N"], "domain": [-2, 2], "kinks": [0.5]}, {"value": 0.5}], "dims": {"N": [1, 8]},
         "reference": "torch:clamp", "vjp": f"{V}:lower_bound_vjp"}
LSQ = {"inputs": [{"shape": ["N"], "domain": [-2, 2]}, {"shape": [1], "domain": [0.1, 0.5]}], "dims": {"N": [1, 8]},
       "reference": f"{V}:lsq_quantise", "vjp": f"{V}:lsq_vjp"}

ROWS = [
    Planted(f"{V}:GuidedReLUNegative", "gradcheck", GUIDED, f"{V}:GuidedReLU", "declared VJP"),
    Planted(f"{V}:GuidedReLUNegative", "dtype", GUIDED, f"{V}:GuidedReLU", "declared VJP", dtype="float32"),
    Planted(f"{V}:GuidedReLURescaled", "gradcheck", GUIDED, f"{V}:GuidedReLU", "zeros cotangents"),
    Planted(f"{V}:GuidedReLUStrideBlind", "gradcheck", GUIDED, f"{V}:GuidedReLU", "non-contiguous cotangents"),
    Planted(f"{V}:LowerBoundInverted", "gradcheck", BOUND, f"{V}:LowerBound", "declared VJP"),
    Planted(f"{V}:LSQUnscaled", "gradcheck", LSQ, f"{V}:LSQ", "declared VJP"),
    Planted(f"{V}:LSQUnscaled", "dtype", LSQ, f"{V}:LSQ", "declared VJP", dtype="float32"),
]

NOT_REPLAYED = {
    **{f"{V}:{name}": "a declared VJP, not a target" for name in ("guided_relu_vjp", "lower_bound_vjp", "lsq_vjp")},
    **{f"{V}:{name}": "a broken declared VJP: the cell is an error naming it, no failure to replay "
                      "(tests/checks/test_intended_vjp.py)" for name in ("raising_vjp", "two_gradients_vjp",
                                                                          "wrong_shape_vjp")},
    f"{V}:lsq_quantise": "a reference, not a target",
    f"{V}:LSQFunctional": "correct, torch.func's style: vmap compares it with its eager Jacobian, not finite "
                          "differences (tests/checks/test_intended_vjp.py); no bug",
}

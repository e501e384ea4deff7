"""Planted intended-gradient bugs replayed (tests/fixtures/intended.py): surrogate spikes, straight-through estimators
and a gradient reversal judged against their declared proxy, a transform that bypasses the surrogate, a module that
drops it in eval(), and a backward that only .backward() runs: their scripts compare with the proxy as the audit does,
and take the gradients through .backward() where the audit did."""

from __future__ import annotations

from tests.replay import Planted

F = "tests.fixtures.intended"
SPIKE = {"inputs": [{"shape": ["N"], "domain": [-2, 2], "kinks": [0]}], "dims": {"N": [1, 8]},
         "reference": f"{F}:heaviside", "proxy": f"{F}:arctan_primitive"}
SIGMOID = {**SPIKE, "proxy": f"{F}:sigmoid_primitive"}
STE = {"inputs": [{"shape": ["N"], "domain": [-2, 2], "kinks": [-1.5, -0.5, 0.5, 1.5]}], "dims": {"N": [1, 8]},
       "reference": "torch:round", "proxy": f"{F}:identity"}
SIGN = {"inputs": [{"shape": ["N"], "domain": [-2, 2], "kinks": [-1, 0, 1]}], "dims": {"N": [1, 8]},
        "reference": "torch:sign", "proxy": f"{F}:hardtanh"}
REVERSAL = {"inputs": [{"shape": ["N"], "domain": [-2, 2]}], "dims": {"N": [1, 8]}, "proxy": f"{F}:reversed_scaled",
            "views": [0]}  # x.view_as(x), as the usual reversal layer returns
REVERSIBLE = {"inputs": [{"shape": ["N"], "domain": [-2, 2]}, {"shape": ["N"], "domain": [-1, 1]}],
              "dims": {"N": [1, 8]}, "reference": f"{F}:reversible_scale_reference"}

LAYER = {"kind": "module", "inputs": [{"shape": [2], "domain": [-2, 2]}], "backward_only": True}

ROWS = [
    Planted(f"{F}:ArctanSpikeSlope", "gradcheck", SPIKE, f"{F}:ArctanSpike", "declared proxy"),
    Planted(f"{F}:ArctanSpikeSlope", "dtype", {**SPIKE, "supports": {"dtypes": ["bfloat16"]}}, f"{F}:ArctanSpike",
            "the proxy itself makes in bfloat16", dtype="bfloat16"),
    Planted(f"{F}:SigmoidSpikeFloat32", "gradcheck", SIGMOID, f"{F}:SigmoidSpike", "declared proxy"),
    Planted(f"{F}:SigmoidSpikeOverflow", "dtype",
            {**SIGMOID, "inputs": [{"shape": ["N"], "domain": [-60, 60], "kinks": [0]}]}, f"{F}:SigmoidSpike",
            "got NaN", dtype="float32"),
    Planted(f"{F}:RoundSTEHalved", "gradcheck", STE, f"{F}:RoundSTE", "declared proxy"),
    Planted(f"{F}:SignSTEUnclipped", "gradcheck", SIGN, f"{F}:SignSTE", "declared proxy"),
    Planted(f"{F}:GradientReversalUnreversed", "gradcheck", REVERSAL, f"{F}:GradientReversal", "declared proxy"),
    Planted(f"{F}:arctan_spike_bypassed", "compile", {**SPIKE, "kind": "callable", "supports": {"compile": True}},
            f"{F}:arctan_spike", "custom backward did not run"),
    Planted(f"{F}:spiking_layer_eval_step", "gradcheck", {**SPIKE, "kind": "module"}, f"{F}:spiking_layer",
            "the module in eval()"),
    Planted(f"{F}:ArctanSpikeJvpStep", "forward_ad", {**SPIKE, "supports": {"forward_ad": True}},
            f"{F}:ArctanSpikeJvp", "forward-mode AD"),
    Planted(f"{F}:ArctanSpikeDetached", "gradgradcheck", {**SPIKE, "supports": {"double_backward": True}},
            f"{F}:ArctanSpike", "second derivative"),
    Planted(f"{F}:ReversibleScaleWrong", "gradcheck", REVERSIBLE, f"{F}:ReversibleScale", "Jacobian mismatch"),
    Planted(f"{F}:reversible_layer_wrong", "gradcheck", LAYER, f"{F}:reversible_layer", "parameter 'w'"),
]

#: Why the intake test's network has no rows: the scan finds its Functions, and the test asserts their verdicts.
INTAKE = ("the spiking network of the intake test (tests/scan/test_intake_model.py), whose verdicts it asserts; its "
          "Functions are found by the scan, not planted beside twins")

MUTATED = ("correct: audit mutate plants its bugs (tests/mutate/), which a weak registration lets survive and a "
           "strong one kills; no bug of its own")

NOT_REPLAYED = {
    **{f"{F}:{name}": "a proxy, not a target" for name in ("arctan_primitive", "sigmoid_primitive", "identity",
                                                            "hardtanh", "reversed_scaled")},
    f"{F}:raising_proxy": "a broken proxy: the cell is an error naming it, no failure to replay "
                          "(tests/checks/test_intended.py)",
    f"{F}:straight_through_proxy": "a proxy that is no primitive: the cell is an error naming it "
                                   "(tests/checks/test_intended.py)",
    f"{F}:heaviside": "a reference, not a target",
    f"{F}:reversible_scale_reference": "a reference, not a target",
    f"{F}:block_reference": "a reference, not a target",
    f"{F}:checkpointed": "correct reentrant checkpointing, audited through .backward() (test_intended.py); no bug",
    f"{F}:SpikingLayer": "the module behind the factory spiking_layer",
    f"{F}:OneBackward": "correct, one backward per forward: audited without a false alarm (test_intended.py); no bug",
    f"{F}:ReversibleLayer": "the module behind the factory reversible_layer",
    f"{F}:ReversibleLayerWrong": "the module behind the factory reversible_layer_wrong",
    f"{F}:SpikingLayerEvalStep": "the module behind the factory spiking_layer_eval_step",
    **{f"tests.fixtures.snn_intake:{name}": INTAKE for name in ("Softsign", "Rate", "SpikingNet", "make_batch", "loss",
                                                               "build")},
    **{f"tests.fixtures.mutation:{name}": MUTATED for name in ("Leaky", "TiledScale", "Cube")},
    **{f"tests.fixtures.mutation:{name}": "a reference, not a target" for name in ("tiled_scale_reference",
                                                                                   "cube_reference")},
}

"""Planted bugs replayed: stochastic Functions against a reference sampler (tests/fixtures/stochastic.py).

The ``statistics`` scripts rerun the whole statistical test (the same seeds, draws and threshold); a backward that
draws a fresh mask has the right gradient distribution, so it is ``gradcheck`` (on the fixed stream) that catches it."""

from __future__ import annotations

from tests.replay import Planted

S = "tests.fixtures.stochastic:"
# Small inputs: each example draws the target and the reference 2,000 times.
NOISE = {"inputs": [{"shape": ["M", "N"]}], "dims": {"M": [1, 2], "N": [1, 3]}, "supports": {"deterministic": False}}
DROPOUT = {**NOISE, "reference": f"{S}dropout_reference"}
JITTER = {**NOISE, "reference": f"{S}jitter_reference"}

ROWS: list[Planted] = [
    Planted(f"{S}DropoutScaledByP", "statistics", DROPOUT, f"{S}Dropout", "differs from the reference's"),
    Planted(f"{S}DropoutUnmaskedBackward", "statistics", DROPOUT, f"{S}Dropout", "an unbiased estimator"),
    Planted(f"{S}JitterWrongGrad", "statistics", JITTER, f"{S}Jitter", "constant over"),
    # No reference: gradcheck would compare the twin's draws with torch's dropout's, which it draws otherwise. At
    # least 9 elements: on 1 to 6 the fresh mask of each backward call happens to equal forward's on this seed.
    Planted(f"{S}DropoutRaising", "forward", DROPOUT, f"{S}Dropout", "raised ValueError: dropout probability"),
    Planted(f"{S}DropoutRedrawnMask", "gradcheck", {**NOISE, "dims": {"M": [3, 4], "N": [3, 4]}}, f"{S}Dropout",
            "Backward is not reentrant"),
]

NOT_REPLAYED: dict[str, str] = {
    f"{S}dropout_reference": "a reference sampler, not a target",
    f"{S}jitter_reference": "a reference sampler, not a target",
    f"{S}DropoutTwoDraws": "correct: a twin that spends more random draws than the reference (test_statistics.py)",
}

"""shared_grad: an input shared across the batch must get the sum of its per-sample gradients."""

from __future__ import annotations

import pytest

from audit.checks import builtin
from audit.results.outcome import HELD, SKIPPED, VIOLATED
from tests.helpers import entry, observe

P = "tests.fixtures.partial"
BATCH = {"inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}, {"shape": ["N"]}], "dims": {"B": [1, 4], "N": [1, 3]},
         "batch": "B"}


def test_a_shared_input_getting_the_mean_fails_at_batch_size_two(tmp_path):
    found = observe(entry(tmp_path, target=f"{P}:ScaleShiftMean", **BATCH), "shared_grad")
    assert found.verdict == VIOLATED and "sum of its 2 per-sample gradients" in found.message, found.message
    assert found.case["dims"]["B"] == 2


def test_the_correct_twin_passes(tmp_path):
    found = observe(entry(tmp_path, target=f"{P}:ScaleShift", **BATCH), "shared_grad")
    assert found.verdict == HELD and found.examples > 1, found.message


def test_gradcheck_misses_the_mean_at_batch_size_one_and_sees_it_above():
    """Why the property draws batches of 2 and up: at 1 the mean is the sum."""
    import torch

    from tests.fixtures.partial import ScaleShiftMean

    one = [torch.randn(1, 3, dtype=torch.float64, requires_grad=True)] + \
          [torch.randn(3, dtype=torch.float64, requires_grad=True) for _ in range(2)]
    assert torch.autograd.gradcheck(ScaleShiftMean.apply, one)
    two = [torch.randn(2, 3, dtype=torch.float64, requires_grad=True)] + one[1:]
    assert not torch.autograd.gradcheck(ScaleShiftMean.apply, two, raise_exception=False)


def test_dependent_samples_contradict_the_batch_declaration(tmp_path):
    found = observe(entry(tmp_path, target=f"{P}:Centered", **BATCH), "shared_grad")
    assert found.verdict == VIOLATED and "sample 0 of 2: output" in found.message


def test_a_batch_reduction_has_no_per_sample_outputs_and_is_a_skip(tmp_path):
    spec = {**BATCH, "reference": None}
    spec.pop("reference")
    found = observe(entry(tmp_path, target="tests.fixtures.smoothness:SquaredNorm", inputs=[{"shape": ["B", "N"]}],
                          dims={"B": [1, 3], "N": [1, 2]}, batch="B"), "shared_grad")
    assert found.verdict == SKIPPED and "no batch axis" in found.message


@pytest.mark.parametrize("keys, applies", [({"batch": "B"}, True), ({}, False),
                                           ({"batch": "B", "dims": {"B": [1, 1], "N": [1, 3]}}, False)])
def test_a_cell_only_with_a_batch_that_can_reach_two(tmp_path, keys, applies):
    spec = {**BATCH, **keys}
    if "batch" not in keys:
        spec.pop("batch")
    assert builtin()["shared_grad"].applies(entry(tmp_path, target=f"{P}:ScaleShift", **spec)) is applies


def test_a_batch_not_used_in_any_shape_is_a_registry_error(tmp_path):
    from audit.core.errors import RegistryError

    with pytest.raises(RegistryError, match="batch: expected a symbolic dim used in an input's shape"):
        entry(tmp_path, target=f"{P}:ScaleShift", **{**BATCH, "batch": "M"})


def test_the_replay_script_fails_with_the_mean_and_passes_with_the_sum(tmp_path):
    import subprocess
    import sys

    from tests.helpers import ROOT

    script = observe(entry(tmp_path, target=f"{P}:ScaleShiftMean", **BATCH), "shared_grad").script
    for text, code in ((script, 1), (script.replace(f"{P}.ScaleShiftMean", f"{P}.ScaleShift"), 0)):
        done = subprocess.run([sys.executable, "-c", text], capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == code, done.stdout + done.stderr


def test_the_shared_mean_is_reported_even_beside_a_bug_that_shows_at_batch_size_one(tmp_path):
    """The QP layer's two bugs in one entry: gradcheck fails on the zero-entry bug; shared_grad reports the
    mean among its distinct failures, shrunk at batch size 2, whichever it met first."""
    bug = entry(tmp_path, target=f"{P}:ScaleShiftMeanZeroRows", **BATCH)
    assert observe(bug, "gradcheck").verdict == VIOLATED
    found = observe(bug, "shared_grad", failures=3)
    assert found.verdict == VIOLATED
    failures = [(found.message, found.case), *((other.message, other.case) for other in found.others)]
    mean = [case for message, case in failures if "sum of its 2 per-sample gradients" in message]
    assert mean and mean[0]["dims"]["B"] == 2, [m for m, _ in failures]

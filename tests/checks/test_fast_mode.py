"""Above the slow-mode limit gradcheck runs in fast mode; the scaled atol keeps it able to catch bugs."""

from __future__ import annotations

import torch

from audit.results.outcome import HELD, VIOLATED
from audit.toolkit.jacobian import SLOW_MODE_LIMIT, gradcheck_options
from tests.helpers import entry, observe

F = "tests.fixtures.broken"


class OneEntryOff(torch.autograd.Function):
    """sin, with the gradient of a single element 1.5x too large (1.1x is below fast mode's power at n = 1,200)."""

    @staticmethod
    def forward(x):
        return torch.sin(x)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        g = grad * torch.cos(x)
        g.view(-1)[0] *= 1.5
        return g


def _big(tmp_path, target):
    return entry(tmp_path, target=target, inputs=[{"shape": [30, 40]}])  # 1,200 elements


def test_large_inputs_use_fast_mode_with_scaled_atol(tmp_path):
    subject = type("S", (), {"entry": _big(tmp_path, f"{F}:Cube"), "dtype": "float64"})()
    options = gradcheck_options(subject, [torch.zeros(30, 40)])
    assert 30 * 40 > SLOW_MODE_LIMIT
    assert options["fast_mode"] and options["atol"] == 1e-5 / 1200 and options["rtol"] == 1e-3 / 1200


def test_fast_mode_still_catches_a_single_wrong_element(tmp_path):
    import sys

    sys.modules[__name__].OneEntryOff = OneEntryOff
    found = observe(_big(tmp_path, f"{__name__}:OneEntryOff"), "gradcheck", examples=3)
    assert found.verdict == VIOLATED


def test_fast_mode_passes_a_correct_function(tmp_path):
    assert observe(_big(tmp_path, f"{F}:Cube"), "gradcheck", examples=3).verdict == HELD

"""Above the slow-mode limit gradcheck runs in fast mode; the scaled atol keeps it able to catch bugs."""

from __future__ import annotations

import torch

from audit.results.outcome import HELD, VIOLATED
from audit.toolkit.jacobian import SLOW_MODE_LIMIT, gradcheck_options
from tests.fixtures.broken import RowScale
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


class _OneWeightOff(RowScale):
    """x * w by rows; w's gradient right but for its first element, 1.5x too large."""

    @staticmethod
    def backward(ctx, grad):
        grad_x, grad_w = RowScale.backward(ctx, grad)
        grad_w[0] *= 1.5
        return grad_x, grad_w


class OneWeightOff(torch.nn.Module):
    """Eight parameters, one of whose gradients is wrong: fast mode's single projection must still see it."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.rand(8) + 0.5)

    def forward(self, x):
        return _OneWeightOff.apply(x, self.w)


def test_a_module_s_parameters_are_judged_in_fast_mode_and_one_wrong_element_is_caught(tmp_path):
    import sys

    sys.modules[__name__].OneWeightOff = OneWeightOff
    module = {"kind": "module", "inputs": [{"shape": ["B", 8]}], "dims": {"B": [1, 3]}}
    subject = type("S", (), {"entry": entry(tmp_path, target=f"{__name__}:OneWeightOff", **module),
                             "dtype": "float64"})()
    options = gradcheck_options(subject, [torch.zeros(8)], fast=True)
    assert options["fast_mode"] and options["atol"] == 1e-5 / 8 and options["rtol"] == 1e-3 / 8
    found = observe(entry(tmp_path, target=f"{__name__}:OneWeightOff", **module), "gradcheck", examples=5)
    assert found.verdict == VIOLATED and "with respect to parameter 'w'" in found.message, found.message
    assert "parameter_options = {'eps': 1e-06, 'atol': 1.25e-06, 'rtol': 0.000125, 'fast_mode': True" in found.script

"""Failure messages name what is wrong, where, and by how much."""

from __future__ import annotations

import re

from audit.results.outcome import HELD, VIOLATED
from tests.helpers import entry, observe

D = "tests.fixtures.degenerate"


def test_a_nan_analytic_gradient_is_named_with_its_place_and_the_numeric_value(tmp_path):
    three = {"inputs": [{"shape": [3]}, {"shape": [3]}, {"shape": [3]}]}
    found = observe(entry(tmp_path, target=f"{D}:NanGradient", **three), "gradcheck", examples=3)
    assert found.verdict == VIOLATED
    said = re.search(r"analytic NaN at d out\[(\d)\] / d in\[2\]\[1\]; numeric (\S+) ", found.message)
    assert said, found.message
    assert abs(float(said.group(2))) <= 1.0 and "not finite" in found.message


def test_a_gradgradcheck_failure_says_where_by_how_much_and_whether_it_is_stable(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "supports": {"double_backward": True}}
    found = observe(entry(tmp_path, target="tests.fixtures.smoothness:WrongSecondDerivative", **spec), "gradgradcheck",
                    examples=3)
    assert found.verdict == VIOLATED
    said = re.search(r"the gradient of input 0 with respect to input 0: max \|analytic - numeric\| = \S+ at .*"
                     r"\(analytic (\S+), numeric (\S+)\) > atol", found.message)
    assert said and said.group(1) != said.group(2), found.message
    assert "at a quarter of the step: stable, the second derivative is wrong there" in found.message, found.message


def test_a_second_derivative_that_finite_differences_cannot_resolve_says_so():
    import torch

    from audit.kit.autograd import GradcheckError
    from audit.kit.explain import explain_gradgradcheck_failure

    def noisy_backward_square(x):  # an adjoint accurate to ~1e-6 by design: its derivative is noise at eps 1e-6
        class Square(torch.autograd.Function):
            @staticmethod
            def forward(ctx, y):
                ctx.save_for_backward(y)
                return y * y

            @staticmethod
            def backward(ctx, grad):
                (y,) = ctx.saved_tensors
                return grad * (2 * y + 1e-6 * torch.sin(1e7 * y))

        return Square.apply(x)

    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    options = {"eps": 1e-6, "atol": 1e-5, "rtol": 1e-3}
    try:
        torch.autograd.gradgradcheck(noisy_backward_square, (x,), **options)
    except GradcheckError as exc:
        said = explain_gradgradcheck_failure(noisy_backward_square, [x], exc, options)
    else:
        raise AssertionError("gradgradcheck held")
    assert "moves with the step" in said and "tolerance question" in said, said


def test_a_forward_ad_failure_says_where_by_how_much_and_whether_it_is_stable(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "supports": {"forward_ad": True}}
    found = observe(entry(tmp_path, target="tests.fixtures.broken:WrongJvp", **spec), "forward_ad", examples=3)
    assert found.verdict == VIOLATED
    said = re.search(r"forward-mode AD: Jacobian mismatch for output 0 with respect to input 0: max \|jvp - numeric\| "
                     r"= \S+ at d out\[\d\] / d in\[\d\] \(jvp (\S+), numeric (\S+)\) > atol", found.message)
    assert said, found.message
    jvp, numeric = float(said.group(1)), float(said.group(2))
    assert abs(jvp - 2 / 3 * numeric) <= 1e-3 * abs(numeric), found.message  # the planted jvp is 2x², not 3x²
    assert "at a quarter of the step: stable, the jvp is wrong there" in found.message, found.message


def test_a_jvp_that_finite_differences_cannot_resolve_at_their_step_says_so():
    import torch

    from audit.kit.autograd import GradcheckError
    from audit.kit.explain import explain_forward_ad_failure
    from tests.fixtures.broken import CubeJvp

    x = torch.tensor([0.3, -0.7], dtype=torch.float64, requires_grad=True)
    options = {"eps": 0.1, "atol": 1e-5, "rtol": 1e-5}  # a right jvp, a coarse step: x³ differenced is off by eps²
    try:
        torch.autograd.gradcheck(CubeJvp.apply, (x,), check_forward_ad=True, check_backward_ad=False,
                                 check_batched_grad=False, **options)
    except GradcheckError as exc:
        said = explain_forward_ad_failure(CubeJvp.apply, [x], exc, options)
    else:
        raise AssertionError("the forward-mode gradcheck held")
    assert "moves with the step" in said and "not a wrong jvp" in said, said


def test_a_jvp_rounded_below_finite_differences_is_caught_by_the_reference_and_its_twin_holds(tmp_path):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}, "supports": {"forward_ad": True},
            "reference": "tests.fixtures.broken:cube_reference"}
    found = observe(entry(tmp_path, target="tests.fixtures.broken:RoundedJvp", **spec), "forward_ad", examples=3)
    assert found.verdict == VIOLATED and "against the reference's forward-mode AD" in found.message, found.message
    twin = observe(entry(tmp_path, target="tests.fixtures.broken:CubeJvp", **spec), "forward_ad", examples=3)
    assert twin.verdict == HELD, twin.message

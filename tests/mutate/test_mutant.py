"""A mutant in a worker: its function's code swapped and put back, whoever holds the function; refused with a reason
where it cannot be swapped."""

from __future__ import annotations

import pytest
import torch

from audit.runtime.mutant import Mutant, MutantError, applied

M = "tests.fixtures.mutation"
DOUBLED = "def backward(ctx, grad):\n    (x,) = ctx.saved_tensors\n    return 2 * (3 * x ** 2 * grad)\n"


def gradient(x):
    from tests.fixtures.mutation import Cube

    y = x.detach().requires_grad_()
    Cube.apply(y).sum().backward()
    return y.grad


def test_the_mutant_runs_while_applied_and_the_original_after():
    x = torch.tensor([0.5, -1.0], dtype=torch.float64)
    with applied(Mutant(M, "Cube.backward", DOUBLED)) as swap:
        assert torch.equal(gradient(x), 6 * x ** 2)
        with swap.running(False):
            assert torch.equal(gradient(x), 3 * x ** 2)
        assert torch.equal(gradient(x), 6 * x ** 2)
    assert torch.equal(gradient(x), 3 * x ** 2)


def test_the_swap_sees_whether_the_mutated_code_ran():
    x = torch.tensor([0.5], dtype=torch.float64)
    with applied(Mutant(M, "Cube.backward", DOUBLED)) as swap:
        seen: list = []
        with swap.watched(seen):
            (x.detach().requires_grad_() * 2).sum().backward()  # not the Function: its backward never runs
        assert not seen
        with swap.watched(seen):
            gradient(x)
        assert seen


def test_a_function_registered_elsewhere_runs_the_mutant_too():
    import examples.library_op as op

    source = ("def _backward(ctx, grad):\n    (x,) = ctx.saved_tensors\n"
              "    return 0 * grad * torch.sigmoid(ctx.beta * x), None\n")
    x = torch.tensor([0.3, -0.4], dtype=torch.float64, requires_grad=True)
    with applied(Mutant("examples.library_op", "_backward", source)):
        (g,) = torch.autograd.grad(op.softplus(x, 2.0).sum(), x)
    assert torch.equal(g, torch.zeros_like(g))
    (g,) = torch.autograd.grad(op.softplus(x, 2.0).sum(), x)
    assert g.abs().min() > 0


@pytest.mark.parametrize("qualname, source, said", [
    ("Cube.nothing", DOUBLED, "is not a Python function"),
    ("Nowhere.backward", DOUBLED, "Nowhere not found"),
    ("Cube.backward", "def backward(ctx, grad:\n", "does not load"),
])
def test_a_mutant_that_cannot_be_loaded_says_why(qualname, source, said):
    with pytest.raises(MutantError, match=said), applied(Mutant(M, qualname, source)):
        pass


@pytest.mark.parametrize("body, differs", [
    ("return grad.mul_(3 * x ** 2)", True),  # the same gradient, written into the incoming one: a side effect
    ("return 3 * (x * x) * grad", False),  # the same gradient, computed in another order: equivalent
    ("return 3 * x ** 2 * grad * 1.01", True),
])
def test_the_probe_tells_a_changed_gradient_or_a_written_cotangent_from_an_equivalent_one(tmp_path, body, differs):
    from audit.engine.equivalence import probe, probe_key
    from audit.runtime.options import RunOptions
    from audit.runtime.target import resolve
    from tests.helpers import ROOT, entry

    spec = entry(tmp_path, target=f"{M}:Cube", inputs=[{"shape": ["N"]}])
    source = f"def backward(ctx, grad):\n    (x,) = ctx.saved_tensors\n    {body}\n"
    with applied(Mutant(M, "Cube.backward", source)) as swap:
        found = probe(spec, resolve(spec, ROOT), swap, probe_key(spec), RunOptions(base=str(ROOT)), 0)
    assert (found.verdict.value == "held") == differs, found.message
    if differs:
        assert found.details["differs"]["registered"]["quantity"] == "gradient", found.details
    else:
        assert found.message.startswith("equivalent"), found.message

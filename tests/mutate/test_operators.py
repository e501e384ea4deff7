"""The mutation operators: each family makes the change it names, one change per mutant, every mutant compiles,
and the same source always gives the same mutants in the same order."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest

from audit.mutate.operators import mutations

BACKWARD = '''    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        g = grad.contiguous()
        dot = (g * x).sum(dim=-1, keepdim=True)
        for k in range(0, 4):
            pass
        mask = x < 0.5
        return g * w - dot / 2, (g * x).sum(0)
'''


def found(source=BACKWARD, role="backward", line=10):
    return mutations(source, line, role)


def operators(source=BACKWARD, role="backward"):
    return [m.operator for m in found(source, role)]


def test_every_mutant_is_one_compiling_function_without_decorators_and_differs_from_the_original():
    original = ast.unparse(ast.parse(textwrap.dedent(BACKWARD)).body[0]).replace("@staticmethod\n", "")
    made = found()
    assert len(made) > 30
    for mutant in made:
        tree = ast.parse(mutant.source)
        assert len(tree.body) == 1 and isinstance(tree.body[0], ast.FunctionDef)
        assert not tree.body[0].decorator_list and tree.body[0].name == "backward"
        assert mutant.source != original
    assert len({m.source for m in made}) == len(made), "two mutants are the same code"


def test_the_same_source_gives_the_same_mutants_in_the_same_order():
    assert [m.source for m in found()] == [m.source for m in found()]


@pytest.mark.parametrize("operator, after", [
    ("scale x2 returned value 0", "return ((g * w - dot / 2) * 2, (g * x).sum(0))"),
    ("scale x1.01 returned value 1", "return (g * w - dot / 2, (g * x).sum(0) * 1.01)"),
    ("negate returned value 0", "return (-(g * w - dot / 2), (g * x).sum(0))"),
    ("drop (None) returned value 1", "return (g * w - dot / 2, None)"),
    ("zero returned value 0", "return (torch.zeros_like(g * w - dot / 2), (g * x).sum(0))"),
    ("detach returned value 0", "return ((g * w - dot / 2).detach(), (g * x).sum(0))"),
    ("float32 returned value 0", "return ((lambda t: t.float().to(t.dtype))(g * w - dot / 2), (g * x).sum(0))"),
    ("swap returned values 0 and 1", "return ((g * x).sum(0), g * w - dot / 2)"),
    ("drop right term", "return (g * w, (g * x).sum(0))"),
    ("swap operands", "return (g * w - 2 / dot, (g * x).sum(0))"),
    ("swap saved tensors 0 and 1", "w, x = ctx.saved_tensors"),
    ("drop .contiguous()", "g = grad"),
    ("comparison boundary", "mask = x <= 0.5"),
    ("range bound +1", "for k in range(0, 4 + 1):"),
    ("reduction dim", "dot = (g * x).sum(dim=0, keepdim=True)"),
    ("reduction dim", "return (g * w - dot / 2, (g * x).sum(-1))"),
    ("constant 2 -> 3", "return (g * w - dot / 3, (g * x).sum(0))"),
    ("constant 0.5 -> 1.0", "mask = x < 1.0"),
])
def test_each_operator_makes_the_change_it_names(operator, after):
    made = {m.after: m for m in found() if m.operator == operator}
    assert after in made, list(made)
    original = ast.unparse(ast.parse(textwrap.dedent(BACKWARD))).splitlines()
    assert made[after].before in [line.strip() for line in original]  # the one line it changes


def test_the_backward_under_no_grad_keeps_its_first_order_math():
    (mutant,) = [m for m in found() if m.operator == "under torch.no_grad()"]
    body = ast.parse(mutant.source).body[0].body
    assert len(body) == 1 and isinstance(body[0], ast.With) and ast.unparse(body[0].items[0]) == "torch.no_grad()"


def test_a_product_with_the_incoming_gradient_is_done_in_place_on_it():
    source = "def backward(ctx, grad):\n    (w,) = ctx.saved_tensors\n    return grad * w\n"
    assert ("return grad * w", "return grad.mul_(w)") in [(m.before, m.after) for m in found(source)]


def test_a_reshape_becomes_a_view_that_assumes_contiguous_memory():
    source = "def backward(ctx, grad):\n    return grad.reshape(-1, 2).sum(0)\n"
    assert ("return grad.reshape(-1, 2).sum(0)", "return grad.view(-1, 2).sum(0)") in [
        (m.before, m.after) for m in found(source) if m.operator == "reshape -> view"]


def test_a_reduction_dim_is_not_also_mutated_as_a_constant():
    source = "def backward(ctx, grad):\n    return grad.sum(dim=-1) + grad.unsqueeze(-1).sum(-1)\n"
    assert not [m for m in found(source) if m.operator.startswith("constant")]


def test_setup_context_swaps_what_it_saves_and_returns_nothing_mutated():
    source = "def setup_context(ctx, inputs, output):\n    x, w = inputs\n    ctx.save_for_backward(x, w)\n"
    made = found(source, "setup_context")
    assert [(m.operator, m.after) for m in made] == [("swap saved arguments 0 and 1", "ctx.save_for_backward(w, x)")]


def test_a_forward_has_no_dropped_output_and_no_no_grad_mutant():
    source = "def forward(x):\n    return x * 3\n"
    names = operators(source, "forward")
    assert "drop (None) returned value 0" not in names and "under torch.no_grad()" not in names
    assert "scale x2 returned value 0" in names


def test_lines_are_those_of_the_file():
    made = found(line=10)  # the source's first line (the decorator) is line 10; the return is 8 lines below
    (scaled,) = [m for m in made if m.operator == "scale x2 returned value 0"]
    assert scaled.line == 10 + 8
    assert scaled.diff == ("L18: return (g * w - dot / 2, (g * x).sum(0)) -> "
                           "return ((g * w - dot / 2) * 2, (g * x).sum(0))")


def test_the_mutants_of_a_real_function_are_made_from_its_own_source():
    from tests.fixtures.mutation import Leaky

    source = inspect.getsource(Leaky.backward)
    made = mutations(source, Leaky.backward.__code__.co_firstlineno, "backward")
    (changed,) = [m for m in made if m.operator == "constant 0.1 -> 1.1"]
    assert changed.after == "return torch.where(x > 0, grad, grad * 1.1)"
    assert changed.line == Leaky.backward.__code__.co_firstlineno + 3


def test_a_long_line_is_trimmed_to_its_change():
    source = ("def backward(ctx, grad):\n    return grad * (ctx.alpha_one + ctx.alpha_two + ctx.alpha_three + "
              "ctx.alpha_four + ctx.alpha_five + ctx.alpha_six + ctx.alpha_seven) * 7\n")
    (changed,) = [m for m in found(source) if m.operator == "constant 7 -> 8"]
    assert changed.before.startswith("...") and changed.before.endswith("* 7") and changed.after.endswith("* 8")
    assert len(changed.after) < 60

"""Mutation operators for gradient code: each :class:`Mutation` is one change to one function's syntax tree.

The operators are those of the bugs custom backwards really have: a gradient scaled, negated, dropped, zeroed or
returned for the wrong input; a term of a sum dropped; the operands of a subtraction or a division swapped; a
constant changed; saved tensors swapped; the math detached or run under ``torch.no_grad()`` (first order right,
second order lost); the result computed in float32; ``.contiguous()`` dropped; the incoming gradient mutated in
place; an off-by-one in a comparison, a ``range``, a slice or a reduction dim. Nothing here imports torch.
"""

from __future__ import annotations

import ast
import copy
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

#: The roles of a function in an autograd Function: which operators apply to each.
GRADIENT_ROLES = ("backward", "vjp", "jvp")
ROLES = (*GRADIENT_ROLES, "setup_context", "forward")
#: Reductions whose ``dim`` (keyword or first positional int) is an off-by-one site.
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod", "logsumexp", "softmax", "cumsum",
                         "norm", "std", "var", "flip", "unsqueeze", "squeeze"})
_FLIPPED_COMPARISONS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}


@dataclass(frozen=True)
class Mutation:
    """One mutant of a function: the operator's name, the line it changes (in the function's file), the code
    before and after (one line each), and the whole mutated function's source (a ``def``, no decorators)."""

    operator: str
    line: int
    before: str
    after: str
    source: str

    @property
    def diff(self) -> str:
        """The change in one line: ``L12: grad * w -> grad * w * 2``."""
        return f"L{self.line}: {self.before} -> {self.after}"


def mutations(source: str, first_line: int, role: str) -> list[Mutation]:
    """Every mutant of the function whose source (as ``inspect.getsource`` gives it, decorators and indentation
    included) is ``source``, starting at line ``first_line`` of its file, playing ``role`` (one of
    :data:`ROLES`); in a fixed order, each a single change. A mutant whose code equals the original's is left
    out, as is one that does not compile."""
    tree = ast.parse(textwrap.dedent(source))
    function: Any = tree.body[0]
    if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ValueError("not a function definition")
    function.decorator_list = []
    original = ast.unparse(function)
    params = [a.arg for a in function.args.posonlyargs + function.args.args]
    context = _Context(role=role, grads=tuple(params[1:]) if role in GRADIENT_ROLES else (),
                       saved=_saved_names(function), offset=first_line - 1)
    found: list[Mutation] = []
    seen = {original}
    for operator in OPERATORS:
        for name, mutated, node_before, node_after, line in operator(function, context):
            text = ast.unparse(mutated)
            if text in seen:
                continue
            try:
                compile(text, "<mutant>", "exec")
            except SyntaxError:
                continue
            seen.add(text)
            before, after = _changed_line(original, text) or (_one_line(node_before), _one_line(node_after))
            found.append(Mutation(name, line + context.offset, before, after, text))
    return found


def _changed_line(original: str, mutated: str) -> tuple[str, str] | None:
    """The one statement line that differs between the two sources, trimmed to the change with a little context
    on each side; None where more than one line differs (a body wrapped in ``with``)."""
    old, new = original.splitlines(), mutated.splitlines()
    changed = [i for i, (a, b) in enumerate(zip(old, new)) if a != b]
    if len(old) != len(new) or len(changed) != 1:
        return None
    a, b = old[changed[0]].strip(), new[changed[0]].strip()
    if max(len(a), len(b)) <= 100:
        return a, b
    start = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    end = next((i for i, (x, y) in enumerate(zip(reversed(a), reversed(b))) if x != y), 0)
    left = max(0, start - 30)

    def cut(text: str) -> str:
        stop = len(text) - max(0, end - 30)
        return ("..." if left else "") + text[left:stop] + ("..." if stop < len(text) else "")

    return cut(a), cut(b)


@dataclass(frozen=True)
class _Context:
    role: str
    grads: tuple[str, ...]  #: the incoming gradient (or tangent) parameters
    saved: tuple[str, ...]  #: names unpacked from ctx.saved_tensors
    offset: int


def _one_line(node: ast.AST | str) -> str:
    text = node if isinstance(node, str) else ast.unparse(node)
    text = " ".join(text.split())
    return text if len(text) <= 100 else text[:97] + "..."


def _sites(function, predicate) -> list[tuple[int, Any]]:
    """Every node of ``function``'s body (not nested functions' defaults) that ``predicate`` accepts, in
    source order, by their index in a walk (stable between copies of the tree)."""
    return [(index, node) for index, node in enumerate(ast.walk(function)) if predicate(node)]


def _rewrite(function, index: int, change: Callable[[ast.AST], ast.AST | None]):
    """A copy of ``function`` where the ``index``-th walked node is replaced by ``change(node)`` (its parent's
    field updated); ``(copy, before, after)``, or None where ``change`` declines."""
    clone = copy.deepcopy(function)
    nodes = list(ast.walk(clone))
    target = nodes[index]
    before = ast.unparse(target)
    replacement = change(target)
    if replacement is None:
        return None
    for parent in nodes:
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, replacement)
            elif isinstance(value, list):
                for k, item in enumerate(value):
                    if item is target:
                        value[k] = replacement
    ast.fix_missing_locations(clone)
    return clone, before, replacement


def _returns(function) -> list[tuple[int, Any]]:
    return _sites(function, lambda n: isinstance(n, ast.Return) and n.value is not None)


def _elements(value: Any) -> list[Any]:
    return list(value.elts) if isinstance(value, ast.Tuple) else [value]


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _with_element(ret: Any, k: int, new: ast.expr) -> ast.Return:
    elements = _elements(ret.value)
    elements[k] = new
    value = ast.Tuple(elts=elements, ctx=ast.Load()) if isinstance(ret.value, ast.Tuple) else elements[0]
    return ast.Return(value=value)


def _element_replaced(k: int, new: ast.expr) -> Callable[[Any], ast.Return]:
    return lambda r: _with_element(r, k, new)


def _expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def _returned_gradients(function, context: _Context) -> Iterator[tuple]:
    """Each returned value (each element of a returned tuple) scaled, negated, dropped, zeroed, detached,
    computed in float32; two returned values swapped."""
    if context.role == "setup_context":
        return
    changes = [("scale x2", "({0}) * 2"), ("scale x0.5", "({0}) * 0.5"), ("scale x1.01", "({0}) * 1.01"),
               ("negate", "-({0})"), ("zero", "torch.zeros_like({0})"), ("detach", "({0}).detach()"),
               ("float32", "(lambda t: t.float().to(t.dtype))({0})")]
    if context.role in GRADIENT_ROLES:
        changes.append(("drop (None)", "None"))
    for index, ret in _returns(function):
        elements = _elements(ret.value)
        for k, element in enumerate(elements):
            if _is_none(element):
                continue
            for name, pattern in changes:
                new = _expr(pattern.format(ast.unparse(element)))
                done = _rewrite(function, index, _element_replaced(k, new))
                if done:
                    clone, _, _ = done
                    yield f"{name} returned value {k}", clone, element, new, ret.lineno
        if context.role in GRADIENT_ROLES:
            for a in range(len(elements) - 1):
                b = a + 1
                if _is_none(elements[a]) or _is_none(elements[b]):
                    continue

                def swapped(r, a=a, b=b):
                    items = _elements(r.value)
                    items[a], items[b] = items[b], items[a]
                    return ast.Return(value=ast.Tuple(elts=items, ctx=ast.Load()))

                done = _rewrite(function, index, swapped)
                if done:
                    yield (f"swap returned values {a} and {b}", done[0], ret.value, done[2].value, ret.lineno)


def _arithmetic(function, context: _Context) -> Iterator[tuple]:
    """A term of a sum or difference dropped; the operands of a subtraction or a division swapped; a product with
    the incoming gradient done in place on it (``grad.mul_(w)``)."""
    for index, node in _sites(function, lambda n: isinstance(n, ast.BinOp)):
        if isinstance(node.op, (ast.Add, ast.Sub)):
            yield from _one(function, index, "drop right term", lambda n: n.left, node)
            if isinstance(node.op, ast.Add):
                yield from _one(function, index, "drop left term", lambda n: n.right, node)
        if isinstance(node.op, (ast.Sub, ast.Div)):
            yield from _one(function, index, "swap operands",
                            lambda n: ast.BinOp(left=n.right, op=n.op, right=n.left), node)
        if isinstance(node.op, ast.Add):
            yield from _one(function, index, "add -> sub",
                            lambda n: ast.BinOp(left=n.left, op=ast.Sub(), right=n.right), node)
        in_place = {ast.Mult: "mul_", ast.Add: "add_", ast.Sub: "sub_", ast.Div: "div_"}.get(type(node.op))
        if in_place and isinstance(node.left, ast.Name) and node.left.id in context.grads:
            yield from _one(function, index, f"in place on {node.left.id}",
                            lambda n, m=in_place: _expr(f"{ast.unparse(n.left)}.{m}({ast.unparse(n.right)})"), node)


def _one(function, index: int, name: str, change, node) -> Iterator[tuple]:
    done = _rewrite(function, index, change)
    if done:
        yield name, done[0], done[1], done[2], getattr(node, "lineno", 1)


def _constants(function, context: _Context) -> Iterator[tuple]:
    """A numeric constant +1, x2, and 0 <-> 1 (booleans are left alone, and a reduction's dim to
    :func:`_off_by_one`)."""
    dims = {id(n) for k in ast.walk(function) if isinstance(k, ast.keyword) and k.arg == "dim" for n in ast.walk(k)}
    dims |= {id(n) for call in ast.walk(function) if _reduction(call) for n in ast.walk(_dim_of(call))}
    for index, node in _sites(function, lambda n: isinstance(n, ast.Constant) and type(n.value) in (int, float)
                              and id(n) not in dims):
        value = node.value
        options = {value + 1, value * 2} | ({1} if value == 0 else {0} if value == 1 else set())
        for new in sorted(options - {value}):
            yield from _one(function, index, f"constant {value!r} -> {new!r}", lambda n, new=new: ast.Constant(new),
                            node)


def _saved(function, context: _Context) -> Iterator[tuple]:
    """Two tensors unpacked from ``ctx.saved_tensors`` swapped; two tensors given to ``ctx.save_for_backward``
    swapped."""
    for index, node in _sites(function, _unpacks_saved):
        names = node.targets[0].elts
        for a in range(len(names) - 1):
            def swapped(n, a=a):
                clone = copy.deepcopy(n)
                elts = clone.targets[0].elts
                elts[a], elts[a + 1] = elts[a + 1], elts[a]
                return clone
            yield from _one(function, index, f"swap saved tensors {a} and {a + 1}", swapped, node)
    for index, node in _sites(function, _saves):
        for a in range(len(node.args) - 1):
            def swapped_args(n, a=a):
                clone = copy.deepcopy(n)
                clone.args[a], clone.args[a + 1] = clone.args[a + 1], clone.args[a]
                return clone
            yield from _one(function, index, f"swap saved arguments {a} and {a + 1}", swapped_args, node)


def _unpacks_saved(node) -> bool:
    return (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Tuple)
            and len(node.targets[0].elts) > 1 and isinstance(node.value, ast.Attribute)
            and node.value.attr in ("saved_tensors", "saved_variables"))


def _saves(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "save_for_backward" and len(node.args) > 1)


def _no_grad(function, context: _Context) -> Iterator[tuple]:
    """The body of a backward run under ``torch.no_grad()``: first order right, the graph for second order lost."""
    if context.role not in GRADIENT_ROLES or not function.body:
        return
    clone = copy.deepcopy(function)
    clone.body = [ast.With(items=[ast.withitem(context_expr=_expr("torch.no_grad()"))], body=clone.body)]
    ast.fix_missing_locations(clone)
    yield "under torch.no_grad()", clone, "<body>", "with torch.no_grad(): <body>", function.body[0].lineno


def _layout(function, context: _Context) -> Iterator[tuple]:
    """``.contiguous()`` dropped, ``.reshape(...)`` as ``.view(...)``: the backward then assumes a contiguous
    gradient (a view of a transposed one fails, or reads the wrong elements)."""
    for index, node in _sites(function, lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                              and n.func.attr == "contiguous" and not n.args):
        yield from _one(function, index, "drop .contiguous()", lambda n: n.func.value, node)
    for index, node in _sites(function, lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                              and n.func.attr == "reshape"):
        yield from _one(function, index, "reshape -> view", _as_view, node)


def _as_view(call: Any) -> Any:
    clone = copy.deepcopy(call)
    clone.func.attr = "view"
    return clone


def _off_by_one(function, context: _Context) -> Iterator[tuple]:
    """``<`` <-> ``<=`` and ``>`` <-> ``>=``; a ``range`` bound ±1; a reduction's dim -1 <-> 0 (``dim=`` or the
    first positional int of a reduction method)."""
    for index, node in _sites(function, lambda n: isinstance(n, ast.Compare) and len(n.ops) == 1
                              and type(n.ops[0]) in _FLIPPED_COMPARISONS):
        yield from _one(function, index, "comparison boundary",
                        lambda n: ast.Compare(left=n.left, ops=[_FLIPPED_COMPARISONS[type(n.ops[0])]()],
                                              comparators=n.comparators), node)
    for index, node in _sites(function, lambda n: isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
                              and n.func.id == "range" and n.args):
        for delta in (1, -1):
            yield from _one(function, index, f"range bound {delta:+d}",
                            lambda n, d=delta: ast.Call(func=n.func, args=[*n.args[:-1], ast.BinOp(
                                left=n.args[-1], op=ast.Add(), right=ast.Constant(d))], keywords=n.keywords), node)
    for index, node in _sites(function, _reduction):
        yield from _one(function, index, "reduction dim", _other_dim, node)


def _dim_of(call: Any) -> Any:
    for k in call.keywords:
        if k.arg == "dim":
            return k.value
    return call.args[0] if call.args else None


def _int_of(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and type(node.operand.value) is int:
        return -node.operand.value
    return None


def _reduction(node) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REDUCTIONS
            and _int_of(_dim_of(node)) is not None)


def _other_dim(call: Any) -> Any:
    clone = copy.deepcopy(call)
    dim = _int_of(_dim_of(clone)) or 0
    new = ast.Constant(0) if dim == -1 else _expr("-1") if dim == 0 else ast.Constant(dim - 1 if dim > 0 else dim + 1)
    for k in clone.keywords:
        if k.arg == "dim":
            k.value = new
            return clone
    clone.args[0] = new
    return clone


#: Every operator, in the order mutants are generated (and so numbered): (function, context) -> each mutant as
#: (name, mutated function, node before, node after, line in the function).
OPERATORS: tuple[Callable[[Any, _Context], Iterator[tuple]], ...] = (
    _returned_gradients, _arithmetic, _saved, _no_grad, _layout, _off_by_one, _constants)


def _saved_names(function) -> tuple[str, ...]:
    names: list[str] = []
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute) \
                and node.value.attr in ("saved_tensors", "saved_variables"):
            target = node.targets[0]
            names += [e.id for e in getattr(target, "elts", [target]) if isinstance(e, ast.Name)]
    return tuple(names)

"""The floor: what a careful user would write by hand to verify the same claims on the same cases as the audit.

For every cell an audit run judged (its ``matrix.json``: ``--matrix``), one process runs the same number of cases
(the cell's drawn examples, then its special points: ``metrics.special_points``) and, on each, the same comparisons,
in plain torch (``tests/bench/test_floor.py`` counts torch's checking calls on both sides):

- gradcheck: torch's gradcheck with the audit's options (its eps, atol and rtol for the dtype; fast mode above 1,024
  elements); for a module, fast gradcheck with respect to its parameters, the tolerances divided by their size; with
  a reference, the target's vjp against the reference's (cotangents drawn from the seed).
- gradgradcheck: the backward differentiated by autograd (its results require grad), then torch's gradgradcheck.
- opcheck (ops): torch.library.opcheck's four utilities.
- vmap: three samples (the case, its values reversed, rolled); outputs under vmap against the loop, per-sample vjps
  under vmap against autograd's, then jacrev (and jacfwd where forward-mode AD is claimed) against central
  differences (the first 64 columns).
- compile: once per cell, the target run eagerly, compiled afresh (Dynamo reset) and run, forward and vjp, on four
  shapes; on each case, outputs and gradients compiled against eager.

The cases are the audit's own, not only as many: the drawn ones come from Hypothesis with the audit's strategy for
the check, the cell's seed and the audit's Hypothesis settings (:func:`audit.engine.explore.given_cases`, not
shrunk), which is how a user writing a property test draws them and the only way to draw the same inputs; the special
points are :func:`audit.inputs.special.special_cases` (rotations, repeated singular values, equal arguments, the
largest sizes), run after the drawn cases held, as the audit runs them. A cell stops at its first failing case, as
the audit's search does (the audit then shrinks a claimed failure; the floor does not). Hypothesis's own cost is on
both sides: measured alone, it is in ``bench/results.md``.

What the floor does not do, because it is not checking: shrink a failure, explain it, excuse a kink, measure noise
after a mismatch (the audit does that only after one), write reports, isolate targets in workers, record seeds.
Run: ``python -m bench.floor bench/registry.yaml --matrix out/matrix.json``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np
import torch

#: gradcheck's step and tolerances by dtype, as the audit passes them; fast mode above SLOW_MODE_LIMIT elements.
EPS = {torch.float64: 1e-6, torch.float32: 1e-3}
GRADCHECK_TOL = {torch.float64: (1e-5, 1e-3), torch.float32: (1e-2, 1e-2)}
SLOW_MODE_LIMIT = 1024
#: Comparisons of two computations (torch.testing's defaults for the dtype).
CLOSE = {torch.float64: (1e-7, 1e-7), torch.float32: (1e-5, 1.3e-6)}
#: Central differences: step and tolerance by dtype, and the columns differenced at most.
DIFFERENCES = {torch.float64: (1e-6, 1e-5, 1e-3), torch.float32: (1e-3, 1e-2, 1e-2)}
COLUMNS = 64
BATCH, SEED = 3, 0
UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")


class Target:
    """One registry entry as a user holds it: the callable at a dtype, its reference, its op, its claims."""

    def __init__(self, entry, dtype: torch.dtype):
        for module in entry.load:
            importlib.import_module(module)
        self.entry, self.dtype, self.op, self.module = entry, dtype, None, None
        if entry.kind == "op":
            namespace, _, name = entry.target.partition("::")
            self.op = getattr(getattr(torch.ops, namespace), name).default
            self.fn = self.op
        else:
            obj = _imported(entry.target)
            if entry.kind == "module":
                self.module = obj().to(dtype)
                self.fn = self.module
            else:
                self.fn = obj.apply if entry.kind == "function" else obj
        self.reference = _imported(entry.reference) if entry.reference else None
        self.forward_ad = bool(entry.supports.forward_ad)
        self.fullgraph = entry.supports.compile == "fullgraph"
        self.noncontiguous = bool(entry.supports.noncontiguous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.splitlines()[0])
    parser.add_argument("registry", type=Path)
    parser.add_argument("--matrix", type=Path, required=True, help="the audit run's matrix.json: its cells and counts")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    spent, cases, failures = run(args.registry, json.loads(args.matrix.read_text()))
    print(f"floor: {sum(spent.values()):.2f} s, {sum(cases.values())} cases, {failures} failing comparisons; "
          "per check: " + ", ".join(f"{k} {v:.2f} s" for k, v in spent.items()))
    return 0


def run(registry: Path, matrix: dict, *, on_case: Callable | None = None, seed: int = 0) -> tuple[dict, dict, int]:
    """Every cell of ``matrix`` whose check the floor knows, on ``registry``'s entries (the run's ``seed``): seconds
    and cases per check, and the failing comparisons. ``on_case(entry name, check, case)`` is told each case."""
    from audit.registry.load import parse_registry

    entries = {entry.name: entry for entry in parse_registry(registry.read_bytes(), str(registry)).entries}
    spent: dict[str, float] = {}
    cases: dict[str, int] = {}
    failures = 0
    for row in matrix["entries"]:
        for cell in row["cells"]:
            check = cell["check"]
            if check not in CHECKS or cell["device"] != "cpu":
                continue
            began = time.perf_counter()
            entry = entries[row["name"]]
            target = Target(entry, getattr(torch, cell["dtype"]))
            special = (cell.get("metrics") or {}).get("special_points", 0)
            told = partial(_tell, on_case, row["name"], check)
            found, ran = CHECKS[check](target, _drawn(entry, check, cell, seed), _special(entry, special), told)
            failures += found
            spent[check] = spent.get(check, 0.0) + time.perf_counter() - began
            cases[check] = cases.get(check, 0) + ran
    return spent, cases, failures


def _tell(on_case: Callable | None, name: str, check: str, case) -> None:
    if on_case is not None:
        on_case(name, check, case)


def _imported(path: str):
    module, _, qualname = path.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _drawn(entry, check: str, cell: dict, seed: int) -> Callable[[Callable], Callable[[], None]]:
    """The cell's drawn cases, as the audit draws them: ``given(run)``, a test that calls ``run(case)`` on each of
    the cell's examples, drawn by Hypothesis from the audit's strategy for the check with the cell's seed, not
    shrunk (:func:`audit.engine.explore.given_cases`)."""
    from audit.engine.explore import given_cases
    from audit.inputs.strategies import cases
    from audit.runtime.options import cell_seed

    strategy = cases(entry, **STRATEGIES[check])
    at = cell_seed(seed, entry.registered_name, check, cell["dtype"], cell["device"])
    return lambda run: given_cases(run, strategy, cell["examples"], at, False)


def _special(entry, count: int) -> list:
    """The first ``count`` of the audit's special points for ``entry`` (as many as the audit ran)."""
    from audit.inputs.special import special_cases

    return list(special_cases(entry)[:count]) if count else []


def _tensors(target: Target, case, laid: bool = False) -> list:
    """A case's arguments at the target's dtype, fresh leaves, contiguous (``laid``: in the case's drawn memory
    layouts)."""
    from audit.inputs.case import TensorArg
    from audit.runtime.subject import laid_out

    found = []
    for k, arg in enumerate(case.args):
        if not isinstance(arg, TensorArg):
            found.append(arg.value)
            continue
        layout = case.layouts[k] if laid and case.layouts else "contiguous"
        tensor = laid_out(arg.values.shape, target.dtype, "cpu", layout)
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(np.array(arg.values, order="C")))
        found.append(tensor.requires_grad_(arg.requires_grad))
    return found


def _of_inputs(fn, args) -> tuple[Callable, list]:
    """``fn`` as a function of its grad-requiring tensors (the others fixed), returning its floating outputs."""
    positions = [i for i, a in enumerate(args) if torch.is_tensor(a) and a.requires_grad]

    def f(*xs):
        full = list(args)
        for i, x in zip(positions, xs):
            full[i] = x
        outputs = [o for o in _outputs(fn(*full)) if o.is_floating_point()]
        return tuple(outputs) if len(outputs) != 1 else outputs[0]

    return f, [args[i] for i in positions]


def _outputs(out) -> list:
    return [out] if torch.is_tensor(out) else [o for o in out if torch.is_tensor(o)]


def _cotangents(outputs: list, seed: int = SEED) -> list:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o.dtype) for o in outputs]


def _vjp(fn, args, seed: int = SEED) -> tuple[list, list]:
    """``fn(*args)``'s outputs, and the gradients of <its differentiable outputs, seeded cotangents> (zeros where an
    input is unused)."""
    outputs = _outputs(fn(*args))
    live = [o for o in outputs if o.requires_grad]
    inputs = [a for a in args if torch.is_tensor(a) and a.requires_grad]
    if not (live and inputs):
        return [o.detach() for o in outputs], []
    grads = torch.autograd.grad(live, inputs, _cotangents(live, seed), allow_unused=True)
    return [o.detach() for o in outputs], [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def _close(got: list, expected: list, dtype) -> bool:
    atol, rtol = CLOSE[dtype]
    return len(got) == len(expected) and all(
        torch.allclose(g, e, rtol=rtol, atol=atol, equal_nan=True) for g, e in zip(got, expected))


def _options(target: Target, inputs: list, fast: bool = False) -> dict:
    size = sum(x.numel() for x in inputs)
    fast = fast or size > SLOW_MODE_LIMIT
    atol, rtol = GRADCHECK_TOL[target.dtype]
    scale = size if fast else 1
    return {"eps": EPS[target.dtype], "atol": atol / scale, "rtol": rtol / scale, "fast_mode": fast,
            "check_undefined_grad": False}


class _Failed(Exception):
    """A comparison did not hold on a case: the cell stops there, as the audit's search does."""


def _each(compare: Callable, *, laid: bool = False):
    """A check that runs ``compare(target, args, case)`` on every case, the drawn ones then the special points (only
    where the drawn held, as the audit tries them), and stops at the first that fails (False, or raised): (1 if one
    failed else 0, the cases run before it and it). ``laid``: the arguments in the case's memory layouts where the
    entry claims non-contiguous inputs."""
    def check(target: Target, drawn: Callable, special: list, told: Callable) -> tuple[int, int]:
        ran: list = []

        def one(case) -> None:
            if ran and ran[-1] is None:  # Hypothesis calls a failing case once more, to report it: not counted
                raise _Failed
            told(case)
            ran.append(case)
            try:
                held = compare(target, _tensors(target, case, laid and target.noncontiguous), case)
            except Exception:  # a claim that does not hold here (the target or a check raised)
                held = False
            if not held:
                ran.append(None)
                raise _Failed

        try:
            drawn(one)()
            for case in special:
                one(case)
        except Exception:
            return 1, len(ran) - 1
        return 0, len(ran)

    return check


def gradcheck(target: Target, args: list, case=None) -> bool:
    f, inputs = _of_inputs(target.fn, args)
    if not inputs:
        return False
    torch.autograd.gradcheck(f, inputs, **_options(target, inputs))
    if target.module is not None:
        names = [n for n, p in target.module.named_parameters() if p.requires_grad]
        values = [target.module.get_parameter(n).detach().clone().requires_grad_() for n in names]
        fixed = tuple(a.detach() if torch.is_tensor(a) else a for a in args)

        def by_parameters(*params):
            return torch.func.functional_call(target.module, dict(zip(names, params)), fixed)

        torch.autograd.gradcheck(by_parameters, values, **_options(target, values, fast=True))
    if target.reference is None:
        return True
    theirs = [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a for a in args]
    return _close(_vjp(target.fn, args)[1], _vjp(target.reference, theirs)[1], target.dtype)


def gradgradcheck(target: Target, args: list, case=None) -> bool:
    f, inputs = _of_inputs(target.fn, args)
    outputs = [o for o in _outputs(f(*inputs)) if o.requires_grad]
    cotangents = [c.requires_grad_() for c in _cotangents(outputs)]
    grads = torch.autograd.grad(outputs, inputs, cotangents, create_graph=True, allow_unused=True)
    if any(g is not None and not g.requires_grad and g.count_nonzero() for g in grads):
        return False
    return torch.autograd.gradgradcheck(f, inputs, **_options(target, inputs))


def opcheck(target: Target, args: list, case=None) -> bool:
    results = torch.library.opcheck(target.op, tuple(args), test_utils=UTILS, raise_exception=False)
    return all(result == "SUCCESS" for result in results.values())


def vmap(target: Target, args: list, case) -> bool:
    dims = tuple(case.in_dims)
    samples = [[_reordered(a, k, d) for a, d in zip(args, dims)] for k in range(BATCH)]
    first = [a.detach() if torch.is_tensor(a) else a for a in samples[0]]
    stacked = [torch.stack([s[i].detach() for s in samples], dim=d) if d is not None else first[i]
               for i, d in enumerate(dims)]
    got = torch.func.vmap(lambda *xs: tuple(_outputs(target.fn(*xs))), in_dims=dims)(*stacked)
    with torch.no_grad():
        loop = [_outputs(target.fn(*s)) for s in samples]
    if not all(_close([g.select(0, k) for g in got], loop[k], target.dtype) for k in range(BATCH)):
        return False
    wrt = [i for i, a in enumerate(args) if torch.is_tensor(a) and a.requires_grad]
    expected, cotangents = [], []
    for k, sample in enumerate(samples):
        live = [o for o in _outputs(target.fn(*sample)) if o.requires_grad]
        cts = _cotangents(live, SEED + k)
        expected.append(list(torch.autograd.grad(live, [sample[i] for i in wrt], cts, allow_unused=True)))
        cotangents.append(cts)

    def per_sample(*flat):
        full, cts = list(flat[:len(args)]), flat[len(args):]

        def f(*xs):
            for i, x in zip(wrt, xs):
                full[i] = x
            return tuple(o for o in _outputs(target.fn(*full)) if o.is_floating_point())

        return torch.func.vjp(f, *[full[i] for i in wrt])[1](tuple(cts))

    stacked_cts = [torch.stack([c[m] for c in cotangents]) for m in range(len(cotangents[0]))]
    got = torch.func.vmap(per_sample, in_dims=dims + (0,) * len(stacked_cts))(*stacked, *stacked_cts)
    if not all(_close([g.select(0, k) for g in got], expected[k], target.dtype) for k in range(BATCH)):
        return False
    return _jacobians(target, samples[0], wrt)


def _reordered(a, k: int, dim):
    """Sample ``k`` of a batch: a batched tensor's values as drawn (0), reversed (odd), rolled by ``k // 2``; an
    unbatched argument (``dim`` None) as it is."""
    if not torch.is_tensor(a) or dim is None:
        return a
    flat = a.detach().reshape(-1)
    flat = torch.roll(flat.flip(0) if k % 2 else flat, k // 2)
    return flat.reshape(a.shape).clone().requires_grad_(a.requires_grad)


def _jacobians(target: Target, sample: list, wrt: list) -> bool:
    """jacrev (and jacfwd with forward-mode AD claimed) against central differences, column by column."""
    base = [a.detach() if torch.is_tensor(a) else a for a in sample]

    def f(*xs):
        full = list(base)
        for i, x in zip(wrt, xs):
            full[i] = x
        return tuple(o for o in _outputs(target.fn(*full)) if o.is_floating_point())

    inputs = [base[i] for i in wrt]
    step, atol, rtol = DIFFERENCES[target.dtype]
    columns = [(j, e) for j, x in enumerate(inputs) for e in range(x.numel())][:COLUMNS]
    numeric = {}
    with torch.no_grad():
        for j, e in columns:
            plus, minus = [x.clone() for x in inputs], [x.clone() for x in inputs]
            plus[j].view(-1)[e] += step
            minus[j].view(-1)[e] -= step
            numeric[(j, e)] = [(p - m) / (2 * step) for p, m in zip(f(*plus), f(*minus))]
    argnums = tuple(range(len(inputs)))
    for transform in [torch.func.jacrev] + ([torch.func.jacfwd] if target.forward_ad else []):
        jac = transform(f, argnums=argnums)(*inputs)
        for (j, e), column in numeric.items():
            for i, expected in enumerate(column):
                got = jac[i][j].reshape(expected.numel(), -1)[:, e].reshape(expected.shape)
                if not torch.allclose(got, expected, atol=atol, rtol=rtol):
                    return False
    return True


def compile_check(target: Target, drawn: Callable, special: list, told: Callable) -> tuple[int, int]:
    """On the cell's first case: the target run eagerly once, compiled afresh and run on the four shapes of the
    sweep; then, on every case, compiled against eager."""
    from audit.toolkit.dynamo import shape_sweep

    compiled: list = []

    def compare(target: Target, args: list, case) -> bool:
        if not compiled:
            _vjp(target.fn, args)
            torch._dynamo.reset()
            compiled.append(torch.compile(target.fn, backend="aot_eager", fullgraph=target.fullgraph))
            for _, swept in shape_sweep(target.entry, case):
                torch.manual_seed(SEED)
                _vjp(compiled[0], _tensors(target, swept))
        torch.manual_seed(SEED)
        expected = _vjp(target.fn, _tensors(target, case))
        torch.manual_seed(SEED)
        got = _vjp(compiled[0], args)
        return _close(got[0], expected[0], target.dtype) and _close(got[1], expected[1], target.dtype)

    return _each(compare)(target, drawn, special, told)


#: Each check: (target, the drawn cases' test, the special points, told) -> (failures, cases run).
CHECKS: dict[str, Callable[[Target, Callable, list, Callable], tuple[int, int]]] = {
    "gradcheck": _each(gradcheck), "gradgradcheck": _each(gradgradcheck), "opcheck": _each(opcheck, laid=True),
    "vmap": _each(vmap), "compile": compile_check}
#: The audit's strategy for each check's cases (``audit.inputs.strategies.cases``), as its catalog declares them.
STRATEGIES: dict[str, dict] = {
    "gradcheck": {}, "gradgradcheck": {}, "opcheck": {"layouts": "mixed"}, "vmap": {"batched": True}, "compile": {}}


if __name__ == "__main__":
    sys.exit(main())

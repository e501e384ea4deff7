"""The floor: what a user would write instead of the audit, in one process, with torch's checks only.

For every entry of the benchmark registry, the same checks the overhead benchmark asks the audit for
(gradcheck, gradgradcheck, opcheck, vmap against the loop with a vjp and jacrev, compile against eager),
on the same number of examples (20 where the entry claims the property, 5 where it does not), with
inputs of random sizes in the registry's ranges. Run: python -m bench.floor bench/registry.yaml
"""

from __future__ import annotations

import importlib
import sys
import time

import numpy as np
import torch
import yaml

CLAIMED, UNCLAIMED = 20, 5


def main(path: str) -> int:
    torch.set_num_threads(1)
    with open(path) as text:
        document = yaml.safe_load(text)
    defaults = document.get("defaults", {})
    failures = 0
    spent: dict[str, float] = {}
    start = time.perf_counter()
    for raw in document["entries"]:
        entry = {**defaults, **raw, "supports": {**defaults.get("supports", {}), **raw.get("supports", {})}}
        fn, op = _target(entry)
        rng = np.random.default_rng(0)
        supports = entry["supports"]
        plan = [("gradcheck", True), ("gradgradcheck", supports.get("double_backward", False)),
                ("vmap", supports.get("vmap", False)), ("compile", supports.get("compile", False))]
        if op is not None:
            plan.append(("opcheck", True))
        for check, claimed in plan:
            began = time.perf_counter()
            compiled = _compiled(fn) if check == "compile" else None
            for _ in range(CLAIMED if claimed else UNCLAIMED):
                args = _args(entry, rng)
                try:
                    CHECKS[check](fn, op, args, compiled)
                except Exception:  # a property that does not hold: counted, as the audit would record it
                    failures += 1
            spent[check] = spent.get(check, 0.0) + time.perf_counter() - began
    print(f"floor: {time.perf_counter() - start:.2f} s, {failures} failing examples; per check: "
          + ", ".join(f"{k} {v:.2f} s" for k, v in spent.items()))
    return 0


def _target(entry):
    for module in entry.get("load", []):
        importlib.import_module(module)
    if entry.get("kind") == "op":
        namespace, _, name = entry["target"].partition("::")
        op = getattr(getattr(torch.ops, namespace), name)
        return op, op.default
    module, _, qualname = entry["target"].partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if entry.get("kind") == "module":
        obj = obj().double()
    return (obj.apply if entry.get("kind", "function") == "function" else obj), None


def _args(entry, rng):
    sizes = {name: int(rng.integers(lo, hi + 1)) for name, (lo, hi) in entry.get("dims", {}).items()}
    args = []
    for spec in entry["inputs"]:
        if "value" in spec:
            args.append(spec["value"])
            continue
        shape = [sizes.get(s, 2) if isinstance(s, str) else s for s in spec["shape"]]
        low, high = spec.get("domain", [-1, 1])
        args.append(torch.tensor(rng.uniform(low, high, shape), dtype=torch.float64).requires_grad_())
    return args


def _split(fn, args):
    positions = [i for i, a in enumerate(args) if torch.is_tensor(a)]

    def f(*xs):
        full = list(args)
        for i, x in zip(positions, xs):
            full[i] = x
        out = fn(*full)
        return out if torch.is_tensor(out) else tuple(o for o in out if torch.is_tensor(o))

    return f, [args[i] for i in positions]


def _gradcheck(fn, op, args, compiled):
    f, xs = _split(fn, args)
    torch.autograd.gradcheck(f, xs)


def _gradgradcheck(fn, op, args, compiled):
    f, xs = _split(fn, args)
    torch.autograd.gradgradcheck(f, xs)


def _opcheck(fn, op, args, compiled):
    torch.library.opcheck(op, tuple(args))


def _vmap(fn, op, args, compiled):
    f, xs = _split(fn, args)
    plain = [x.detach() for x in xs]
    batch = [torch.stack([x, x.flip(-1) if x.dim() else x, x * 0.5]) for x in plain]
    out = torch.func.vmap(f)(*batch)
    loop = [f(*[b[k] for b in batch]) for k in range(3)]
    first = out if torch.is_tensor(out) else out[0]
    torch.testing.assert_close(first[0], loop[0] if torch.is_tensor(loop[0]) else loop[0][0])

    def per_sample(*ys):
        out, pull = torch.func.vjp(f, *ys)
        return pull(torch.ones_like(out) if torch.is_tensor(out) else tuple(torch.ones_like(o) for o in out))

    torch.func.vmap(per_sample)(*batch)
    torch.func.jacrev(f, argnums=tuple(range(len(plain))))(*plain)


def _compile(fn, op, args, compiled):
    f, xs = _split(fn, args)
    eager = f(*xs)
    fresh = [x.detach().clone().requires_grad_() for x in xs]
    got = compiled(*[a if not torch.is_tensor(a) else fresh.pop(0) for a in args])
    first, expected = (got if torch.is_tensor(got) else got[0]), (eager if torch.is_tensor(eager) else eager[0])
    torch.testing.assert_close(first, expected)
    first.sum().backward()


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=True)


CHECKS = {"gradcheck": _gradcheck, "gradgradcheck": _gradgradcheck, "opcheck": _opcheck, "vmap": _vmap,
          "compile": _compile}


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "bench/registry.yaml"))

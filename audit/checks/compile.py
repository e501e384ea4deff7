"""``compile``: under torch.compile the target's outputs and gradients equal eager mode's, it does not
crash, and new shapes do not recompile it every time; with ``compile: fullgraph`` it also traces as one
graph. Graph breaks are always recorded in ``metrics``: under ``compile: true`` they are a performance
fact (the broken-off part runs eagerly, with the same results), not a failure."""

from __future__ import annotations

import time

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit import dynamo
from audit.toolkit import noise
from audit.toolkit.tensors import compare_all, gradients, outputs_of
from audit.toolkit.torch_bugs import COMPILE_MARK_DIRTY, TorchBugHit, compile_drops_mark_dirty


def run(subject, case) -> None:
    """Once per cell: compile and sweep shapes (compile time, recompiles). Every example: compare with eager."""
    if subject.entry.kind == "model":
        return _model_step(subject)
    compiled = subject.state.get("compiled")
    if compiled is None:
        compiled = subject.state["compiled"] = _prepare(subject, case)
    if subject.state.get("sweep_failure"):
        raise Violation(subject.state["sweep_failure"])
    eager_args, compiled_args = subject.args(case), subject.args(case)
    eager = _run(_outside(subject, subject.fn), eager_args, subject.seed)
    with dynamo.graph_breaks_explained():
        got = _run(_outside(subject, compiled.fn), compiled_args, subject.seed)
    tol = subject.tolerance()
    measured = noise.noise(lambda xs: list(_run(_outside(subject, subject.fn), xs, subject.seed)), subject.args(case))
    noise.compare_within_noise("compiled output", got[0], eager[0], tol, lambda: measured()[0])
    try:
        noise.compare_within_noise("compiled gradient of input", got[1], eager[1], tol, lambda: measured()[1])
    except Violation as exc:
        if subject.entry.mutates and subject.state.get("mark_dirty_bug"):
            raise TorchBugHit(COMPILE_MARK_DIRTY, str(exc)) from None
        raise


def _run(fn, args, seed: int):
    """Outputs and, when something is differentiable, gradients of <outputs, random cotangents>."""
    outputs = outputs_of(fn(*args))
    return [o.detach() for o in outputs], gradients(outputs, args, seed)


def _outside(subject, fn):
    """``fn`` guarded outside the traced call: in-place inputs cloned, generators re-seeded; draws left as
    torch makes them (a dispatch mode cannot be traced)."""
    return subject.guard(fn, canonical=False)


def _prepare(subject, case) -> dynamo.Compiled:
    """Compile afresh for this cell, then run a sweep of shapes to measure compile time and recompiles.

    The target runs eagerly once first: code that fills a lazy cache or global on its first call traces
    differently afterwards (xitorch 0.5.1's solve recompiles for every new shape only then), and in a full run
    the checks before this one have always called it, so without the warm-up a cell alone (``--check compile``,
    ``audit repro``) and the replay script would see a cold target and another verdict."""
    _run(_outside(subject, subject.fn), subject.args(case), subject.seed)
    if subject.entry.mutates:  # before compile_fresh: the canary resets Dynamo
        subject.state["mark_dirty_bug"] = compile_drops_mark_dirty(subject.options.compile_backend)
    compiled = dynamo.compile_fresh(subject.fn, subject.options.compile_backend, fullgraph=fullgraph(subject.entry))
    start = time.perf_counter()
    sweep = dynamo.shape_sweep(subject.entry, case)
    with dynamo.graph_breaks_explained():
        for sizes, swept in sweep:
            compiled.note_shape(sizes)
            _run(_outside(subject, compiled.fn), subject.args(swept), subject.seed)
    subject.metrics.update({"backend": subject.options.compile_backend, "graphs": compiled.graphs,
                            "shapes": len(sweep), "compile_seconds": round(time.perf_counter() - start, 3),
                            "recompiles": len(compiled.recompiles), **compiled.graph_breaks()})
    problem = compiled.recompiles_every_shape()
    if problem:
        subject.state["sweep_failure"] = problem
    return compiled


def fullgraph(entry) -> bool:
    """Whether the entry claims one graph (``compile: fullgraph``): only then is a graph break a failure."""
    return entry.supports.compile == "fullgraph"


def _model_step(subject) -> None:
    """kind model: one training step of the compiled model gives the eager step's loss and gradients."""
    import torch

    from audit.checks import training

    eager, compiled = training.build(subject), training.build(subject)
    compiled.module = torch.compile(compiled.module, backend=subject.options.compile_backend)
    batch = eager.batch(subject.entry.training.batch, 0)
    expected = eager.step(*batch)
    start = time.perf_counter()
    with dynamo.graph_breaks_explained():
        got = compiled.step(*compiled.batch(subject.entry.training.batch, 0))
    subject.metrics.update({"backend": subject.options.compile_backend,
                            "compile_seconds": round(time.perf_counter() - start, 3)})
    tol = subject.tolerance()
    compare_all("compiled training step: loss", [got.detach()], [expected.detach()], tol)
    names = list(eager.grads())
    try:
        compare_all("compiled training step: gradient", list(compiled.grads().values()), list(eager.grads().values()),
                    tol)
    except Violation as exc:
        index = str(exc).split("gradient ")[1].split(":")[0]
        raise Violation(f"{exc} (parameter {names[int(index)]!r})") from None


def _script_values(subject, case) -> dict:
    """The backend, the fullgraph claim and the comparison; for an operator, the shapes the sweep ran."""
    found = {**tolerance_values(subject, case), "backend": subject.options.compile_backend}
    if subject.entry.kind == "model":
        return found
    return {**found, "fullgraph": fullgraph(subject.entry),
            "sweep": [swept for _, swept in dynamo.shape_sweep(subject.entry, case)]}


_DYNAMO = """\
import torch._dynamo
from torch._dynamo.utils import counters


def dynamo_failed(exc):
    \"\"\"Say why torch.compile refused, as the audit does, and exit 1.\"\"\"
    first = (str(exc).strip().splitlines() or ["(no message)"])[0]
    if isinstance(exc, torch._dynamo.exc.Unsupported):
        print("graph break under torch.compile(fullgraph=True):", first)
    else:
        print(f"torch.compile failed: {type(exc).__name__}: {first}")
    sys.exit(1)
"""

SCRIPT = _DYNAMO + """

def run(f, xs):
    \"\"\"Outputs of f on fresh copies of xs, and the gradients of <differentiable outputs, the cell's cotangents>.\"\"\"
    xs = fresh(xs)
    outs = tensors_of(f(*xs))
    return [o.detach() for o in outs], vjp(outs, xs)


graphs = 0


def counting(gm, example_inputs):  # the cell's backend, counting the graphs it is handed
    global graphs
    graphs += 1
    return torch._dynamo.lookup_backend(backend)(gm, example_inputs)


run(audited, args)  # warm, as in the audit: a first eager call may fill a cache that changes what Dynamo traces
torch._dynamo.reset()
counters.clear()
for name in ("recompile_limit", "cache_size_limit"):  # Dynamo would fall back to eager silently after 8
    if hasattr(torch._dynamo.config, name):
        setattr(torch._dynamo.config, name, max(64, getattr(torch._dynamo.config, name)))
# fullgraph: what compile: fullgraph claims (only then is a graph break a failure); the call guarded outside
compiled = guarded(torch.compile(_target, backend=counting, fullgraph=fullgraph))
try:
    seen, recompiled = set(), []  # the audit's shape sweep: the third new shape must not compile again
    for xs in sweep:
        shape, before = tuple(tuple(x.shape) for x in xs if torch.is_tensor(x)), graphs
        run(compiled, xs)
        if shape not in seen:
            seen.add(shape)
            recompiled.append(graphs > before)
    if len(seen) >= 3 and all(recompiled):
        print(f"torch.compile recompiled for every new shape ({graphs} graphs for {len(seen)} shapes): a size is "
              "specialised, e.g. turned into a Python int")
        sys.exit(1)
    eager, got = run(audited, args), run(compiled, args)
except torch._dynamo.exc.TorchDynamoException as exc:
    dynamo_failed(exc)
print("graph breaks:", sum(counters["graph_break"].values()), "(a failure only under compile: fullgraph)")
noise = spread(lambda xs: list(run(audited, xs)), args)  # eager's own rounding noise, as the audit measures it
failed = differs("compiled output", got[0], eager[0], atol + FACTOR * noise[0])
failed = failed or differs("compiled gradient of input", got[1], eager[1], atol + FACTOR * noise[1])
sys.exit(1 if failed else 0)
"""

MODEL_SCRIPT = _DYNAMO + """
eager, make_batch, loss_fn = build()
model = build()[0]
compiled = torch.compile(model, backend=backend)
inputs, targets = batch(make_batch, plan["batch"], 0)
expected = step(eager, loss_fn, inputs, targets)
try:
    got = step(compiled, loss_fn, *batch(make_batch, plan["batch"], 0))
except torch._dynamo.exc.TorchDynamoException as exc:
    dynamo_failed(exc)
print("loss: compiled", got.item(), "eager", expected.item())
failed = not close(got, expected)
failed |= differ("compiled training step: gradient", gradients(model), gradients(eager))
sys.exit(1 if failed else 0)
"""


CHECK = declared(
    "compile",
    run=run,
    script=SCRIPT,
    model_script=MODEL_SCRIPT,
    script_values=lambda subject, case: _script_values(subject, case),
)

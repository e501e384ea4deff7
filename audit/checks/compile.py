"""``compile``: under torch.compile the target's outputs and gradients equal eager mode's, it does not
crash, and new shapes do not recompile it every time; with ``compile: fullgraph`` it also traces as one
graph. Graph breaks are always recorded in ``metrics``: under ``compile: true`` they are a performance
fact (the broken-off part runs eagerly, with the same results), not a failure."""

from __future__ import annotations

import time

from audit.checks.catalog import declared
from audit.checks import dynamo
from audit.checks.interface import Violation
from audit.checks.tensors import compare_all, gradients, outputs_of
from audit.checks.torch_bugs import COMPILE_MARK_DIRTY, TorchBugHit, compile_drops_mark_dirty


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
    compare_all("compiled output", got[0], eager[0], tol)
    try:
        compare_all("compiled gradient of input", got[1], eager[1], tol)
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
    """Compile afresh for this cell, then run a sweep of shapes to measure compile time and recompiles."""
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


CHECK = declared(
    "compile",
    run=run,
    script="""\
import torch._dynamo
from torch._dynamo.utils import counters
torch._dynamo.reset()
compiled = torch.compile(fn, backend="aot_eager")  # fullgraph=True: what compile: fullgraph claims
eager_out = fn(*args)
fresh = [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a for a in args]
compiled_out = compiled(*fresh)
print("eager:   ", eager_out)
print("compiled:", compiled_out)
print("graph breaks:", sum(counters["graph_break"].values()), list(counters["graph_break"])[:1])
""",
)

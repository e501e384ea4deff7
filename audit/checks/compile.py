"""``compile``: under torch.compile the target's outputs and gradients equal eager mode's, it does not
crash, and new shapes do not recompile it every time; with ``compile: fullgraph`` it also traces as one
graph. Graph breaks are always recorded in ``metrics``: under ``compile: true`` they are a performance
fact (the broken-off part runs eagerly, with the same results), not a failure."""

from __future__ import annotations

import time

import torch

from audit.checking import judgement, replayable
from audit.catalog.checks import declared
from audit.checking.judgement import KnownBug
from audit.catalog.interface import Violation, tolerance_values
from audit.kit.autograd import call_vjp
from audit.kit.calls import guarded
from audit.kit.compare import COMPILED_GRADIENT, mismatch, mismatches
from audit.kit.compiled import Compiled, dynamo_refusal
from audit.kit.models import built_model, model_batch, parameter_grads, training_step
from audit.kit.noise import measured_noise, noisy_mismatches
from audit.kit.proxy import bypass_hint
from audit.kit.tensors import fresh
from audit.registry.model import EntryKind
from audit.toolkit import dynamo
from audit.toolkit.torch_bugs import COMPILE_MARK_DIRTY, compile_drops_mark_dirty


def compile(fn, ref, args, *, target, mutates, seed, tol, backend, fullgraph, sweep, proxy_name="",
            vjp_name="") -> list:
    """The target run eagerly once (a first call may fill a cache that changes what Dynamo traces), then compiled
    afresh on ``backend`` (``fullgraph``: one graph, a graph break fails), run on each case of the shape ``sweep``
    (the third new shape must not compile again), and on ``args`` against eager: outputs and gradients within
    ``tol`` plus eager's own rounding noise. Each call guarded outside the compiled code (a written input cloned,
    torch's generator reset to ``seed``)."""
    eager = guarded(target, mutates, seed)
    call_vjp(eager, fresh(args), seed, keep="all")
    compiled = Compiled(target, backend, fullgraph)
    try:
        return (compiled_sweep(compiled, sweep, mutates, seed)
                or against_eager(eager, guarded(compiled.fn, mutates, seed), args, seed, tol, proxy_name, vjp_name))
    except torch._dynamo.exc.TorchDynamoException as exc:
        return [dynamo_refusal(exc)]


def compiled_sweep(compiled, sweep, mutates, seed: int) -> list:
    """The compiled target run on each case of the sweep; a line when every new shape compiled again."""
    call = guarded(compiled.fn, mutates, seed)
    for xs in sweep:
        compiled.note_shape(xs)
        call_vjp(call, fresh(xs), seed, keep="all")
    problem = compiled.recompiles_every_shape()
    return [problem] if problem else []


def against_eager(eager, compiled, args, seed: int, tol, proxy_name: str = "", vjp_name: str = "") -> list:
    """Outputs and gradients of ``compiled`` against ``eager``'s, on fresh copies of ``args``, within ``tol`` plus
    NOISE_FACTOR times eager's own rounding noise there; a gradient of an entry with a declared proxy (or VJP) that
    differs says the custom backward may not have run (:func:`audit.kit.proxy.bypass_hint`)."""
    expected, got = call_vjp(eager, fresh(args), seed, keep="all"), call_vjp(compiled, fresh(args), seed, keep="all")
    measured = measured_noise(lambda xs: list(call_vjp(eager, xs, seed, keep="all")), fresh(args))
    return (noisy_mismatches("compiled output", got[0], expected[0], tol, lambda: measured()[0])
            or [line.worded(line + bypass_hint("gradient", proxy_name, "torch.compile", vjp_name)) for line in
                noisy_mismatches(COMPILED_GRADIENT, got[1], expected[1], tol, lambda: measured()[1])])


def compile_model(fn, ref, args, *, dtype, device, plan, backend, tol, observe=None) -> list:
    """kind model: one training step of the compiled model (built from the factory ``fn`` like the eager one, on
    the batch of seed 0) gives the eager step's loss and parameter gradients within ``tol``. ``observe(seconds)``,
    if given, is told how long the compiled step took."""
    import time

    built = [built_model(fn, dtype, device) for _ in range(2)]
    if isinstance(built[0], str):
        return [built[0]]
    (eager, make_batch, loss_fn), (model, compiled_batch, compiled_loss) = built
    compiled = torch.compile(model, backend=backend)
    expected = training_step(eager, loss_fn, model_batch(make_batch, plan["batch"], 0, dtype, device))
    start = time.perf_counter()
    try:
        got = training_step(compiled, compiled_loss, model_batch(compiled_batch, plan["batch"], 0, dtype, device))
    except torch._dynamo.exc.TorchDynamoException as exc:
        return [dynamo_refusal(exc)]
    if observe is not None:
        observe(time.perf_counter() - start)
    found = mismatches("compiled training step: loss", [got.detach()], [expected.detach()], tol)
    grads = zip(parameter_grads(model).values(), parameter_grads(eager).items())
    return found or [f"compiled training step: gradient {i}: {problem} (parameter {name!r})"
                     for i, (g, (name, e)) in enumerate(grads) for problem in [mismatch(g, e, tol)] if problem]


def run(subject, case) -> None:
    """Once per cell: compile and sweep shapes (compile time, recompiles). Every example: compare with eager.
    The stages of :func:`compile`, each called as it calls them; a model: :func:`compile_model`."""
    dynamo.warm(subject.options.compile_backend)  # before any compile is timed (its start-up is no entry's)
    if subject.entry.kind == EntryKind.MODEL:
        def observe(seconds):
            subject.metrics.update({"backend": subject.options.compile_backend, "compile_seconds": round(seconds, 3)})

        judgement.settle(subject, case, replayable.problems(CHECK, subject, case, observe=observe))
        return
    mutates, seed = list(subject.entry.mutates), subject.seed
    eager = guarded(subject.fn, mutates, seed)
    if "compiled" not in subject.state:
        subject.state["compiled"] = _prepare(subject, case, eager)
    if subject.state.get("sweep_failure"):
        raise Violation(subject.state["sweep_failure"])
    compiled = guarded(subject.state["compiled"].fn, mutates, seed)
    with dynamo.graph_breaks_explained():
        found = against_eager(eager, compiled, subject.args(case), seed, subject.tolerance(), subject.entry.proxy or "",
                              subject.entry.vjp or "")
    judgement.settle(subject, case, found, EXCUSES)


def _drops_mark_dirty(subject) -> bool:
    """An entry that writes an input, where this torch's compile drops ``ctx.mark_dirty`` (its canary says so)."""
    return bool(subject.entry.mutates and subject.state.get("mark_dirty_bug"))


#: A compiled gradient that differs from eager's is PyTorch's bug where compile drops ``ctx.mark_dirty``.
EXCUSES = (KnownBug(COMPILE_MARK_DIRTY, (COMPILED_GRADIENT,), when=_drops_mark_dirty),)


def _prepare(subject, case, eager) -> Compiled:
    """Compile afresh for this cell, then run the sweep of shapes to measure compile time and recompiles.

    The target runs eagerly once first: code that fills a lazy cache or global on its first call traces
    differently afterwards (xitorch 0.5.1's solve recompiles for every new shape only then), and in a full run
    the checks before this one have always called it, so without the warm-up a cell alone (``--check compile``,
    ``audit repro``) and the replay script would see a cold target and another verdict."""
    call_vjp(eager, subject.args(case), subject.seed, keep="all")
    if subject.entry.mutates:  # before compiling: the canary resets Dynamo
        subject.state["mark_dirty_bug"] = compile_drops_mark_dirty(subject.options.compile_backend)
    compiled = Compiled(subject.fn, subject.options.compile_backend, fullgraph=fullgraph(subject.entry))
    sweep = [subject.args(swept) for _, swept in dynamo.shape_sweep(subject.entry, case)]
    start = time.perf_counter()
    with dynamo.graph_breaks_explained():
        found = compiled_sweep(compiled, sweep, list(subject.entry.mutates), subject.seed)
    subject.metrics.update({"backend": subject.options.compile_backend, "graphs": compiled.graphs,
                            "shapes": len(sweep), "compile_seconds": round(time.perf_counter() - start, 3),
                            "recompiles": len(compiled.recompiles), **compiled.graph_breaks()})
    if found:
        subject.state["sweep_failure"] = found[0]
    return compiled


def fullgraph(entry) -> bool:
    """Whether the entry claims one graph (``compile: fullgraph``): only then is a graph break a failure."""
    return entry.supports.compile == "fullgraph"


def _script_values(subject, case) -> dict:
    """The backend, the fullgraph claim and the comparison; for an operator, the shapes the sweep runs."""
    found = {**tolerance_values(subject, case), "backend": subject.options.compile_backend}
    if subject.entry.kind == EntryKind.MODEL:
        return found
    return {**found, "fullgraph": fullgraph(subject.entry),
            "sweep": [swept for _, swept in dynamo.shape_sweep(subject.entry, case)]}


CHECK = declared(
    "compile",
    run=run,
    replay=compile,
    model_replay=compile_model,
    replay_helpers=(compiled_sweep, against_eager),
    script_values=_script_values,
)

"""One entry's behaviour in this environment, on fixed cases (:func:`~audit.inputs.special.plain_cases`): for each
claimed dtype and device, its outputs, its VJPs for seeded cotangents (a module's parameters included), its JVPs
where it claims forward AD and its second-order products where it claims double backward; a model's training
trajectory (loss and gradient norm per step) and its outputs on a fixed batch; a module's or model's state dict;
and a timed forward and backward.

Each value comes with the error its own computation makes in its dtype, measured here: the same computation in
float64 on the same (rounded) inputs is its truth. A float64 value has no wider truth: its error is its float32
twin's, scaled by the ratio of their precisions (the computation's conditioning times float64's unit roundoff).
"""

from __future__ import annotations

import copy
import functools
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from audit.behaviour.values import EPS, Cost, EntryRecord, Value
from audit.inputs.case import Case
from audit.inputs.special import plain_cases
from audit.kit import calls
from audit.kit.autograd import differentiable, grad_inputs, tangents, vjp
from audit.kit.models import Batch, built_model, model_batch, sgd, training_step
from audit.kit.tensors import floating, outputs_of, widest
from audit.registry.model import Entry, EntryKind
from audit.runtime import definition
from audit.runtime.subject import Subject
from audit.runtime.target import ModuleCall, Target

#: The twin a wide dtype's error is estimated from (its error scaled by the ratio of their precisions).
NARROWER = {"float64": "float32", "complex128": "complex64"}
#: Timed samples of a forward and backward, after one warm-up call; a sample holds enough calls to last about
#: SAMPLE_SECONDS (at most MAX_CALLS).
SAMPLES, SAMPLE_SECONDS, MAX_CALLS = 7, 2e-3, 200

#: (kind, label, tensor) for each value one evaluation yields, in a fixed order.
Quantities = list[tuple[str, str, torch.Tensor]]


@dataclass(frozen=True)
class Measured:
    """One entry's record and the tensors it names (``Value.key`` -> tensor; the state dict under ``state/``)."""

    record: EntryRecord
    tensors: dict[str, torch.Tensor]


def measure(entry: Entry, target: Target, seed: int, devices: tuple[str, ...],
            old_state: dict[str, torch.Tensor] | None = None) -> Measured:
    """Everything :mod:`audit.behaviour` records of ``entry`` on ``devices`` (those of its claimed devices this
    machine has); ``old_state``: the state dict another environment recorded, loaded strictly here."""
    tensors: dict[str, torch.Tensor] = {}
    values: list[Value] = []
    costs: list[Cost] = []
    notes: list[str] = []
    cells = [(dtype, device) for device in devices for dtype in entry.supports.dtypes]
    if entry.kind == EntryKind.MODEL:
        _model(entry, target, seed, cells, tensors, values, notes)
        costs += [_timed(functools.partial(_training_step, entry, target, dtype, device), dtype, device)
                  for dtype, device in cells]
    else:
        _operator(entry, target, seed, cells, tensors, values, costs, notes)
    state, load = _state(entry, target, tensors), None
    if old_state is not None and state:
        load = _checkpoint(entry, target, seed, cells, old_state, tensors, values)
    read = definition.constants(target.obj) if entry.kind != EntryKind.OP else {}
    return Measured(EntryRecord(entry.name, entry.kind.value, target.digest, tuple(values), tuple(costs), state,
                                load, tuple(notes), constants=read), tensors)


def _operator(entry: Entry, target: Target, seed: int, cells, tensors, values, costs, notes) -> None:
    cases = plain_cases(entry, seed)
    if not cases:
        notes.append("no fixed case: a sparse input, or no tensor input (values not recorded)")
        return
    if not entry.supports.deterministic:
        notes.append("draws random numbers (supports.deterministic: false): its values depend on torch's random "
                     "streams and are not recorded (its cost is)")
    errors = Errors(lambda dtype, device, case: _evaluate(entry, target, seed, dtype, device, case))
    for dtype, device in cells:
        for index, case in enumerate(cases if entry.supports.deterministic else ()):
            for (kind, label, tensor), error, scale in errors.judged(dtype, device, case):
                key = f"{dtype}/{device}/case{index}/{kind}/{label}"
                tensors[key] = tensor.detach().cpu()
                values.append(Value(key, kind, label, dtype, device, case.describe(), error, scale,
                                    exact=not floating(tensor)))
        costs.append(_cost(entry, target, seed, dtype, device, cases[0]))


class Errors:
    """Each value of one evaluation with its own error and scale: the evaluation in the cell's dtype against the same
    in float64 on the same rounded inputs; a wide dtype's error its narrower twin's, scaled by their precisions (0
    where the target does not run narrower: the rounding floor alone). Each evaluation is made once."""

    def __init__(self, evaluate: Callable[[str, str, Case], tuple[Quantities, Quantities]]):
        self.evaluate = evaluate
        self.done: dict[tuple[str, str, str], tuple[Quantities, Quantities]] = {}

    def judged(self, dtype: str, device: str, case: Case) -> Iterator[tuple[tuple[str, str, torch.Tensor], float,
                                                                              float]]:
        """(kind, label, tensor), error, scale for every value of ``case`` in the cell (dtype, device)."""
        got, truth = self._run(dtype, device, case)
        if dtype in NARROWER:
            narrow = self._narrow(NARROWER[dtype], device, case)
            ratio = EPS[dtype] / EPS[NARROWER[dtype]]
            errors = [e * ratio for e in narrow] if len(narrow) == len(got) else [0.0] * len(got)
        else:
            errors = [_difference(g, t) for (_, _, g), (_, _, t) in zip(got, truth)]
        for quantity, (_, _, true), error in zip(got, truth, errors):
            yield quantity, error, _largest(true)

    def _run(self, dtype: str, device: str, case: Case) -> tuple[Quantities, Quantities]:
        key = (dtype, device, case.describe())
        if key not in self.done:
            self.done[key] = self.evaluate(dtype, device, case)
        return self.done[key]

    def _narrow(self, dtype: str, device: str, case: Case) -> list[float]:
        """The errors of the narrower twin ([] where the target cannot run in that dtype)."""
        try:
            got, truth = self._run(dtype, device, case)
        except Exception:  # a float64-only target
            return []
        return [_difference(g, t) for (_, _, g), (_, _, t) in zip(got, truth)]


def _evaluate(entry: Entry, target: Target, seed: int, dtype: str, device: str, case: Case):
    """The quantities of ``case`` in the cell, and the same in float64 from the cell's rounded inputs."""
    subject = Subject(entry, target, dtype, device, seed)
    args = subject.args(case)
    got = quantities(entry, subject, args, seed, _module(target, dtype, device))
    if dtype in NARROWER:  # already the widest: its own truth
        return got, got
    wide = [a.detach().to(widest(a)).requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) and floating(a)
            else a for a in args]
    truth = quantities(entry, subject, wide, seed, _module(target, _widest(dtype), device))
    return got, truth


def quantities(entry: Entry, subject: Subject, args: list, seed: int, module) -> Quantities:
    """What one evaluation yields: outputs, VJPs (inputs, then a module's parameters), JVPs where forward AD is
    claimed, second-order products where double backward is."""
    fn = subject.guard(subject.target.fn)
    outputs = outputs_of(fn(*args))
    found: Quantities = [("output", f"output {i}", o.detach()) for i, o in enumerate(outputs)]
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad] if module is not None else []
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]
    inputs = grad_inputs(args) + [p for _, p in params]
    labels = [f"gradient of input {i}" for i in positions] + [f"gradient of parameter {n}" for n, _ in params]
    live = differentiable(outputs)
    if not (live and inputs):
        return found
    second = entry.supports.double_backward
    grads = vjp(live, inputs, seed, create_graph=second)
    found += [("vjp", label, g.detach()) for label, g in zip(labels, grads)]
    if second:
        pairs = [(label, g) for label, g in zip(labels, grads) if g.requires_grad]
        if pairs:
            products = vjp([g for _, g in pairs], inputs, seed + 2)
            found += [("second_order", f"second-order product for {label.removeprefix('gradient of ')}", p.detach())
                      for label, p in zip(labels, products)]
    if entry.supports.forward_ad and not module:
        found += [("jvp", f"tangent of output {i}", t) for i, t in
                  enumerate(tangents(fn, [a.detach().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor)
                                          else a for a in args], seed, args_dtype(args)))]
    return found


def args_dtype(args: list):
    """The dtype of the first floating argument (float64 without one)."""
    return next((a.dtype for a in args if isinstance(a, torch.Tensor) and floating(a)), torch.float64)


def _module(target: Target, dtype: str, device: str):
    """A module entry's module at the cell (its parameters take gradients too), None for other kinds."""
    maker = target.fn
    return maker.module(getattr(torch, dtype), device) if isinstance(maker, ModuleCall) else None


def _difference(got: torch.Tensor, truth: torch.Tensor) -> float:
    """The largest difference between a value and its truth (0 for an exact dtype, inf where only one is NaN)."""
    if not floating(got) or got.numel() == 0:
        return 0.0
    a, b = got.detach().to(widest(got)).cpu(), truth.detach().to(widest(got)).cpu()
    same_nan = torch.isnan(a) & torch.isnan(b)
    moved = (a - b).abs().masked_fill(same_nan, 0)
    return float(moved.max()) if not torch.isnan(moved).any() else math.inf


def _largest(tensor: torch.Tensor) -> float:
    if not floating(tensor) or tensor.numel() == 0:
        return 0.0
    finite = tensor.detach().abs()
    finite = finite[torch.isfinite(finite)]
    return float(finite.max()) if finite.numel() else 0.0


def _cost(entry: Entry, target: Target, seed: int, dtype: str, device: str, case: Case) -> Cost:
    """Seconds per forward and backward on ``case``, and the peak memory on CUDA (:func:`_timed`)."""
    subject = Subject(entry, target, dtype, device, seed)
    module = _module(target, dtype, device)
    return _timed(lambda: quantities(_plain(entry), subject, subject.args(case), seed, module), dtype, device)


def _training_step(entry: Entry, target: Target, dtype: str, device: str):
    """A model's one training step (forward, backward) on batch 0, as timed."""
    model, make_batch, loss_fn = _built(target, dtype, device)
    return training_step(model, loss_fn, model_batch(make_batch, entry.training.batch, 0, getattr(torch, dtype),
                                                        device))


def _timed(once: Callable[[], object], dtype: str, device: str) -> Cost:
    """:data:`SAMPLES` samples of seconds per call of ``once`` (each sample about :data:`SAMPLE_SECONDS` of calls,
    after a warm-up), and the peak memory of one call on CUDA."""
    once()
    start = time.perf_counter()
    once()
    calls_per_sample = max(1, min(MAX_CALLS, int(SAMPLE_SECONDS / max(time.perf_counter() - start, 1e-9))))
    samples = []
    for _ in range(SAMPLES):
        start = time.perf_counter()
        for _ in range(calls_per_sample):
            once()
        _synchronize(device)
        samples.append((time.perf_counter() - start) / calls_per_sample)
    peak, memory = _peak(device, once)
    return Cost(dtype, device, tuple(samples), peak, memory)


def _plain(entry: Entry) -> Entry:
    """``entry`` as timed: one forward and backward, nothing of second order or forward mode."""
    return replace(entry, supports=replace(entry.supports, double_backward=False, forward_ad=False))


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _peak(device: str, once: Callable[[], object]) -> tuple[float | None, str]:
    if device != "cuda":
        return None, f"not measured on {device}: torch keeps no allocator statistics there"
    torch.cuda.reset_peak_memory_stats()
    once()
    return torch.cuda.max_memory_allocated() / 2 ** 20, "torch.cuda.max_memory_allocated of one forward and backward"


def _state(entry: Entry, target: Target, tensors: dict) -> dict[str, str]:
    """A module's or model's state dict as built from the audit's seed, into ``tensors`` under ``state/``; its keys
    with each tensor's shape and dtype."""
    built = _fresh(entry, target)
    if built is None:
        return {}
    state = {}
    for name, tensor in built.state_dict().items():
        tensors[f"state/{name}"] = tensor.detach().cpu().clone()
        state[name] = f"{list(tensor.shape)} {str(tensor.dtype).removeprefix('torch.')}"
    return state


def _fresh(entry: Entry, target: Target):
    """A newly built module (a module entry's, or a model entry's model), or None for other kinds."""
    from audit.kit.models import seeded

    if isinstance(target.fn, ModuleCall):
        return target.fn.fresh(ModuleCall.SEED)
    if entry.kind == EntryKind.MODEL:
        built = seeded(target.fn, 0)
        return built[0] if isinstance(built, tuple) and built and isinstance(built[0], torch.nn.Module) else None
    return None


def _checkpoint(entry: Entry, target: Target, seed: int, cells, old_state: dict, tensors, values) -> str:
    """The old state dict loaded strictly into a module built here, and its outputs on the fixed cases recorded
    as ``checkpoint/`` values; "" when it loaded, else what the load said (missing and unexpected keys)."""
    built = _fresh(entry, target)
    if built is None:
        return "the target builds no module here"
    try:
        built.load_state_dict(old_state, strict=True)
    except Exception as exc:  # a strict load's RuntimeError names every missing and unexpected key
        return f"{type(exc).__name__}: {exc}"
    if entry.kind == EntryKind.MODEL:
        _model_outputs(entry, target, seed, cells, tensors, values, built)
        return ""
    maker = target.fn
    assert isinstance(maker, ModuleCall)  # a module entry's (a model's returned above)
    loaded = ModuleCall(maker.factory)
    loaded.instances["base"] = built
    relocated = Target(fn=loaded, reference=None, digest=target.digest, obj=target.obj)
    for dtype, device in cells:
        for index, case in enumerate(plain_cases(entry, seed)):
            subject = Subject(entry, relocated, dtype, device, seed)
            with torch.no_grad():
                outputs = outputs_of(subject.evaluate(*subject.args(case)))
            for i, output in enumerate(outputs):
                _keep(tensors, values, f"checkpoint/{dtype}/{device}/case{index}/output/output {i}", "checkpoint",
                      f"output {i}", dtype, device, case.describe(), output)
    return ""


def _keep(tensors, values, key, kind, label, dtype, device, case, tensor, error=0.0, scale=None) -> None:
    tensors[key] = tensor.detach().cpu()
    values.append(Value(key, kind, label, dtype, device, case, error,
                        _largest(tensor) if scale is None else scale, exact=not floating(tensor)))


def _model(entry: Entry, target: Target, seed: int, cells, tensors, values, notes) -> None:
    """A model's training trajectory and its outputs on a fixed batch, in each cell, each with its own error (each
    trajectory run once: a float64 cell's is its own truth, and its float32 twin is the float32 cell's)."""
    if not entry.supports.deterministic:
        notes.append("draws random numbers (supports.deterministic: false): its trajectory is not recorded")
        return
    run = functools.cache(lambda dtype, device, wide: _trajectory(entry, target, dtype, device, wide))
    for dtype, device in cells:
        got, truth = run(dtype, device, dtype), run(dtype, device, _widest(dtype))
        if dtype in NARROWER:
            narrow = NARROWER[dtype]
            twin, twin_truth = run(narrow, device, narrow), run(narrow, device, _widest(narrow))
            errors = {k: _running(twin[k], twin_truth[k], EPS[dtype] / EPS[narrow]) for k in got}
        else:
            errors = {k: _running(got[k], truth[k], 1.0) for k in got}
        for kind in ("loss", "grad_norm"):
            for step, (value, error) in enumerate(zip(got[kind], errors[kind])):
                _keep(tensors, values, f"{dtype}/{device}/training/{kind}/step {step}", kind,
                      f"{'loss' if kind == 'loss' else 'gradient norm'} at step {step}", dtype,
                      device, f"batch {step} of {entry.training.batch}", torch.tensor(value, dtype=torch.float64),
                      error, abs(truth[kind][step]))
    _model_outputs(entry, target, seed, cells, tensors, values, None)


def _widest(dtype: str) -> str:
    """Where a dtype's truth is computed: complex128 for a complex one, else float64."""
    return "complex128" if "complex" in dtype else "float64"


def _trajectory(entry: Entry, target: Target, dtype: str, device: str, wide: str) -> dict[str, list[float]]:
    """The losses and gradient norms of ``entry.training.steps`` SGD steps, the model built in ``dtype`` then (and
    each batch made in ``dtype``, then) cast to ``wide``: the computation in ``wide`` from the same rounded start."""
    model, make_batch, loss_fn = _built(target, dtype, device)
    model = model.to(getattr(torch, wide))
    losses, norms = [], []
    for step in range(entry.training.steps):
        batch = _widened(model_batch(make_batch, entry.training.batch, step, getattr(torch, dtype), device), wide)
        calls.reseed(step)
        loss = training_step(model, loss_fn, batch)
        grads = [p.grad for p in model.parameters() if p.grad is not None]
        losses.append(float(loss.detach()))
        norms.append(float(torch.sqrt(sum((g.double() ** 2).sum() for g in grads))) if grads else 0.0)
        sgd(model, entry.training.lr)
    return {"loss": losses, "grad_norm": norms}


def _running(got: list[float], truth: list[float], ratio: float) -> list[float]:
    """Each step's error as the largest of the steps so far: a trajectory's error only accumulates."""
    found, worst = [], 0.0
    for a, b in zip(got, truth):
        worst = max(worst, abs(a - b) * ratio if math.isfinite(a - b) else math.inf)
        found.append(worst)
    return found


def _built(target: Target, dtype: str, device: str):
    built = built_model(target.fn, getattr(torch, dtype), device)
    if isinstance(built, str):
        raise ValueError(built)
    return built


def _model_outputs(entry: Entry, target: Target, seed: int, cells, tensors, values, loaded) -> None:
    """The model's outputs on batch 0 in each cell (``loaded``: from an old state dict, recorded as checkpoint
    values), each with its own error (a wide dtype's from its narrower twin's, each evaluation made once)."""
    prefix, kind = ("checkpoint/", "checkpoint") if loaded is not None else ("", "output")
    run = functools.cache(lambda dtype, device: _batch_outputs(entry, target, seed, dtype, device, loaded))
    for dtype, device in cells:
        got, truth = run(dtype, device)
        if dtype in NARROWER:
            twin, twin_truth = run(NARROWER[dtype], device)
            errors = [_difference(g, t) * EPS[dtype] / EPS[NARROWER[dtype]] for g, t in zip(twin, twin_truth)]
        else:
            errors = [_difference(g, t) for g, t in zip(got, truth)]
        for i, (g, t, error) in enumerate(zip(got, truth, errors)):
            _keep(tensors, values, f"{prefix}{dtype}/{device}/batch0/output/output {i}", kind, f"output {i}", dtype,
                  device, f"batch 0 of {entry.training.batch}", g, error, _largest(t))


def _batch_outputs(entry: Entry, target: Target, seed: int, dtype: str, device: str, loaded):
    """The model's outputs on batch 0 in (dtype, device), and the same model and batch cast to float64 (a wide dtype:
    its own outputs)."""
    model, make_batch, _ = _built(target, dtype, device)
    if loaded is not None:
        model = copy.deepcopy(loaded).to(dtype=getattr(torch, dtype), device=torch.device(device))
    batch = model_batch(make_batch, entry.training.batch, 0, getattr(torch, dtype), device)
    with torch.no_grad():
        calls.reseed(seed)
        got = outputs_of(batch.forward(model))
        if dtype in NARROWER:
            return got, got
        calls.reseed(seed)
        wide = _widest(dtype)
        truth = outputs_of(_widened(batch, wide).forward(copy.deepcopy(model).to(getattr(torch, wide))))
    return got, truth


def _widened(batch: Batch, dtype: str) -> Batch:
    """``batch`` with its floating tensors cast to ``dtype``."""
    return Batch(tuple(_cast(x, dtype) for x in batch.args), {k: _cast(v, dtype) for k, v in batch.kwargs.items()},
                 _cast(batch.targets, dtype))


def _cast(value, dtype: str):
    if isinstance(value, torch.Tensor) and floating(value):
        return value.to(getattr(torch, dtype))
    return value


def load_state(path: Path) -> dict[str, torch.Tensor]:
    """The state dict an entry's file holds (its ``state/`` tensors)."""
    found = torch.load(path, weights_only=True)
    return {k.removeprefix("state/"): v for k, v in found.items() if k.startswith("state/")}

"""``shared_grad``: for an entry whose samples along ``batch`` are independent, the batch is its samples.

Each sample's outputs are what that sample alone gives, each batched input's gradient is its gradient
alone, and an input without the batch dim (a parameter shared across the batch) gets the *sum* of its
per-sample gradients. A shared input that gets their mean, the first sample's, or a batch-size-dependent
scale passes every check at batch size 1 and is wrong at every other; the batch is drawn of size 2 and up.
"""

from __future__ import annotations

import torch

from audit.checks.catalog import MIN_BATCH, declared
from audit.checks.interface import NotApplicable, Violation, tolerance_values
from audit.inputs.case import Case, TensorArg
from audit.toolkit.tensors import compare_all, floating, mismatch, outputs_of, widest



def run(subject, case) -> None:
    """The batch against each sample alone: outputs, batched inputs' gradients, shared inputs' sums."""
    entry, size = subject.entry, dict(case.dims)[subject.entry.batch]
    if not entry.supports.deterministic:
        raise NotApplicable("a stochastic entry (supports.deterministic: false) draws other noise for one sample "
                            "than for the whole batch: samples cannot be compared one by one")
    if size < MIN_BATCH:
        raise NotApplicable(f"the batch dim {entry.batch} ranges below {MIN_BATCH}: one sample shows nothing")
    axes = _batch_axes(entry)
    batch_args, batch_out = _forward(subject, case)
    samples = [_forward(subject, _sample(case, axes, b)) for b in range(size)]
    out_axes = [_output_axis(o, s, size) for o, s in zip(batch_out, samples[0][1])]
    tol = subject.tolerance()
    for b, (_, out) in enumerate(samples):  # outputs first: dependent samples contradict the declaration
        compare_all(f"sample {b} of {size}: output", [o.detach() for o in out],
                    [o.detach().narrow(ax, b, 1) for o, ax in zip(batch_out, out_axes)], tol)
    cotangents = _cotangents(batch_out, subject.seed)
    params = _parameters(subject)
    batch_grads = _gradients(batch_args, batch_out, cotangents, params)
    sample_grads = []
    for b, (args, out) in enumerate(samples):
        grads = _gradients(args, out, [c.narrow(ax, b, 1) for c, ax in zip(cotangents, out_axes)], params)
        for i, ax in axes.items():
            if i in grads:
                compare_all(f"sample {b} of {size}: gradient of input", [grads[i]], [batch_grads[i].narrow(ax, b, 1)],
                            tol)
        sample_grads.append(grads)
    _shared(entry, size, batch_grads, sample_grads, axes, tol)


def _shared(entry, size: int, batch_grads: dict, sample_grads: list, axes: dict, tol) -> None:
    for i in sorted(batch_grads.keys() - axes.keys(), key=str):
        label = f"gradient of parameter {i!r}" if isinstance(i, str) else f"gradient of input {i}"
        problem = mismatch(batch_grads[i], sum(g[i] for g in sample_grads), tol)
        if problem:
            raise Violation(f"{label}: {problem} (shared across the batch of {size}: no {entry.batch} dim) vs the "
                            f"sum of its {size} per-sample gradients; a shared input must get the sum (not the "
                            "mean, the first sample's, or a scale that depends on the batch size)")


def _batch_axes(entry) -> dict[int, int]:
    """Input position -> the axis of the batch dim, for the inputs that have it."""
    return {i: spec.shape.index(entry.batch) for i, spec in entry.tensor_inputs if entry.batch in spec.shape}


def _sample(case: Case, axes: dict[int, int], b: int) -> Case:
    """``case`` cut to sample ``b`` (size 1 along the batch axis of every batched input)."""
    args = tuple(TensorArg(a.values.take([b], axis=axes[i]), a.requires_grad, a.dtype) if i in axes else a
                 for i, a in enumerate(case.args))
    return Case(case.dims, args)


def _forward(subject, case):
    args = subject.args(case)
    return args, [o for o in outputs_of(subject.call(args)) if floating(o)]


def _parameters(subject) -> dict[str, torch.Tensor]:
    """A module's parameters that require grad, by name: shared across the batch like unbatched inputs."""
    if subject.entry.kind != "module":
        return {}
    module = subject.target.fn.module(getattr(torch, subject.dtype), subject.device)
    return {name: p for name, p in module.named_parameters() if p.requires_grad}


def _gradients(args, outputs, cotangents, params: dict | None = None) -> dict:
    """Gradients of <outputs, cotangents> by input position, and by name for ``params`` (zeros where unused)."""
    inputs = {i: a for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad}
    inputs.update(params or {})
    live = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
    if not (live and inputs):
        return {i: torch.zeros_like(x) for i, x in inputs.items()}
    grads = torch.autograd.grad([o for o, _ in live], list(inputs.values()), [c for _, c in live], allow_unused=True)
    return {i: g if g is not None else torch.zeros_like(x) for (i, x), g in zip(inputs.items(), grads)}


def _output_axis(batch: torch.Tensor, sample: torch.Tensor, size: int) -> int:
    """The one axis along which ``batch`` (an output for the whole batch) has the batch's size and
    ``sample`` (the same output for one sample) has 1, every other axis alike."""
    if batch.dim() == sample.dim():
        for ax in range(batch.dim()):
            others = [n for k, n in enumerate(batch.shape) if k != ax] == [n for k, n in enumerate(sample.shape) if k != ax]
            if batch.shape[ax] == size and sample.shape[ax] == 1 and others:
                return ax
    raise NotApplicable(f"an output of shape {list(batch.shape)} for the batch is {list(sample.shape)} for one "
                        "sample: it has no batch axis, and the per-sample property needs per-sample outputs")


def _cotangents(outputs, seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o) for o in outputs]


CHECK = declared(
    "shared_grad",
    run=run,
    script="""\
def run(xs):  # floating outputs and, for cotangents cut from the batch's, gradients by input position
    xs = [x.detach().requires_grad_(x.requires_grad) if torch.is_tensor(x) else x for x in xs]
    out = fn(*xs)
    return xs, [o for o in (out if isinstance(out, (tuple, list)) else (out,)) if torch.is_tensor(o) and floating(o)]
def gradients(xs, outs, cots):
    diff = {i: x for i, x in enumerate(xs) if torch.is_tensor(x) and x.requires_grad}
    if isinstance(fn, torch.nn.Module):  # a module's parameters are shared across the batch too
        diff.update({name: p for name, p in fn.named_parameters() if p.requires_grad})
    live = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
    found = torch.autograd.grad([o for o, _ in live], list(diff.values()), [c for _, c in live], allow_unused=True)
    return {i: torch.zeros_like(x) if g is None else g for (i, x), g in zip(diff.items(), found)}
def axis_of(o, one):  # the output's batch axis: the batch's size there, 1 for one sample, all else alike
    return next(ax for ax in range(o.dim()) if o.shape[ax] == size and one.shape[ax] == 1)
size = next(args[i].shape[axis] for i, axis in batch_axes.items())
xs, outs = run(args)
samples = [run([a.narrow(batch_axes[i], b, 1) if i in batch_axes else a for i, a in enumerate(args)])
           for b in range(size)]
out_axes = [axis_of(o, one) for o, one in zip(outs, samples[0][1])]
failed = False
for b, (_, one) in enumerate(samples):  # outputs: each sample alone gives its slice of the batch's
    failed |= differs(f"sample {b} of {size}: output", [o.detach() for o in one],
                      [o.detach().narrow(ax, b, 1) for o, ax in zip(outs, out_axes)])
generator = torch.Generator().manual_seed(seed)
cots = [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o) for o in outs]
whole = gradients(xs, outs, cots)
per_sample = [gradients(x, one, [c.narrow(ax, b, 1) for c, ax in zip(cots, out_axes)])
              for b, (x, one) in enumerate(samples)]
for b, got in enumerate(per_sample):  # a batched input's gradient: each sample's is its slice
    for i, ax in batch_axes.items():
        if i in got:
            failed |= differs(f"sample {b} of {size}: gradient of input {i}", [got[i]], [whole[i].narrow(ax, b, 1)])
for i in sorted(whole.keys() - batch_axes.keys(), key=str):  # shared: the sum of its per-sample gradients
    total = sum(g[i] for g in per_sample)
    print(f"{i!r} (shared): batch of {size} gives", whole[i].tolist(), "; the sum of per-sample gradients is",
          total.tolist())
    failed |= differs(f"gradient of shared {i!r} vs the per-sample sum", [whole[i]], [total])
print("FAILS" if failed else "holds")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)

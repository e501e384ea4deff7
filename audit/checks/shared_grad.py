"""``shared_grad``: for an entry whose samples along ``batch`` are independent, the batch is its samples.

Each sample's outputs are what that sample alone gives, each batched input's gradient is its gradient
alone, and an input without the batch dim (a parameter shared across the batch) gets the *sum* of its
per-sample gradients. A shared input that gets their mean, the first sample's, or a batch-size-dependent
scale passes every check at batch size 1 and is wrong at every other; the batch is drawn of size 2 and up.
"""

from __future__ import annotations

import torch

from audit.catalog.checks import MIN_BATCH, declared
from audit.catalog.interface import tolerance_values
from audit.kit.refusal import NotApplicable
from audit.kit.autograd import grad_outputs, module_of, vjp
from audit.kit.compare import mismatch, mismatches
from audit.kit.tensors import floating, outputs_of


def shared_grad(fn, ref, args, *, seed, tol, batch_axes, batch) -> list:
    """The batch (``batch_axes``: argument -> the axis of the ``batch`` dim) against each sample alone, within
    ``tol``: outputs, then each batched input's gradient (cotangents drawn from ``seed``, each sample's cut from
    the batch's), then each shared input's (and a module's parameters') against the sum of its samples'."""
    size = next(args[i].shape[axis] for i, axis in batch_axes.items())
    whole, outputs = floating_outputs(fn, args)
    samples = [floating_outputs(fn, sample_of(args, batch_axes, b)) for b in range(size)]
    axes = [sample_axis(o, s, size) for o, s in zip(outputs, samples[0][1])]
    for b, (_, out) in enumerate(samples):  # outputs first: dependent samples contradict the declaration
        found = mismatches(f"sample {b} of {size}: output", [o.detach() for o in out],
                           [o.detach().narrow(ax, b, 1) for o, ax in zip(outputs, axes)], tol)
        if found:
            return found
    cotangents = grad_outputs(outputs, seed)
    params = {name: p for name, p in module_of(fn).named_parameters() if p.requires_grad} if module_of(fn) else {}
    batch_grads = gradients_by_position(whole, outputs, cotangents, params)
    sample_grads = []
    for b, (sample, out) in enumerate(samples):
        grads = gradients_by_position(sample, out, [c.narrow(ax, b, 1) for c, ax in zip(cotangents, axes)], params)
        for i, ax in batch_axes.items():
            problem = mismatch(grads[i], batch_grads[i].narrow(ax, b, 1), tol) if i in grads else None
            if problem:
                return [f"sample {b} of {size}: gradient of input {i}: {problem}"]
        sample_grads.append(grads)
    for i in sorted(batch_grads.keys() - batch_axes.keys(), key=str):
        label = f"gradient of parameter {i!r}" if isinstance(i, str) else f"gradient of input {i}"
        problem = mismatch(batch_grads[i], sum(g[i] for g in sample_grads), tol)
        if problem:
            return [f"{label}: {problem} (shared across the batch of {size}: no {batch} dim) vs the sum of its "
                    f"{size} per-sample gradients; a shared input must get the sum (not the mean, the first "
                    "sample's, or a scale that depends on the batch size)"]
    return []


def floating_outputs(fn, args):
    """New leaves with the values of ``args`` (requiring grad as they do), and the floating outputs on them."""
    leaves = [a.detach().clone(memory_format=torch.contiguous_format).requires_grad_(a.requires_grad)
              if isinstance(a, torch.Tensor) else a for a in args]
    return leaves, [o for o in outputs_of(fn(*leaves)) if floating(o)]


def sample_of(args, batch_axes: dict, b: int) -> list:
    """``args`` cut to sample ``b`` (size 1 along the batch axis of every batched argument)."""
    return [a.detach().narrow(batch_axes[i], b, 1).requires_grad_(a.requires_grad) if i in batch_axes else a
            for i, a in enumerate(args)]


def sample_axis(batch, sample, size: int) -> int:
    """The one axis along which ``batch`` (an output for the whole batch) has the batch's size and ``sample`` (the
    same output for one sample) has 1, every other axis alike; :class:`NotApplicable` where there is none."""
    if batch.dim() == sample.dim():
        for ax in range(batch.dim()):
            others = tuple(batch.shape[:ax] + batch.shape[ax + 1:]) == tuple(sample.shape[:ax] + sample.shape[ax + 1:])
            if batch.shape[ax] == size and sample.shape[ax] == 1 and others:
                return ax
    raise NotApplicable(f"an output of shape {list(batch.shape)} for the batch is {list(sample.shape)} for one "
                       "sample: it has no batch axis, and the per-sample property needs per-sample outputs")


def gradients_by_position(args, outputs, cotangents, params: dict) -> dict:
    """Gradients of <outputs, cotangents> by argument position, and by name for ``params`` (zeros where unused)."""
    inputs = {i: a for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad}
    inputs.update(params)
    live = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
    if not (live and inputs):
        return {i: torch.zeros_like(x) for i, x in inputs.items()}
    return dict(zip(inputs, vjp([o for o, _ in live], list(inputs.values()), [c for _, c in live])))


def stochastic(subject, case) -> str:
    """Why a stochastic entry's samples cannot be compared one by one."""
    if not subject.entry.supports.deterministic:
        return ("a stochastic entry (supports.deterministic: false) draws other noise for one sample than for the "
                "whole batch: samples cannot be compared one by one")
    return ""


def one_sample(subject, case) -> str:
    """Why a batch of one shows nothing."""
    if dict(case.dims)[subject.entry.batch] < MIN_BATCH:
        return f"the batch dim {subject.entry.batch} ranges below {MIN_BATCH}: one sample shows nothing"
    return ""


def _values(subject, case) -> dict:
    """The entry's tolerance and the name of its batch dim."""
    return {**tolerance_values(subject, case), "batch": subject.entry.batch}


CHECK = declared("shared_grad", refusals=(stochastic, one_sample), replay=shared_grad, script_values=_values,
                 replay_helpers=(floating_outputs, sample_of, sample_axis, gradients_by_position))

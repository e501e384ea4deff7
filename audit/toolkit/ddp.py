"""The module the distributed check trains: the entry with its inputs turned into parameters.

Inputs without the batch dim become parameters; inputs with it are data, each multiplied by a learnable
scale (so the entry's input gradients reach a parameter too). The loss is ``sum(out ** 2) / 2`` over
every floating output: a sum over samples, so a batch split across ranks adds up to the whole batch.
Shared by the check (one process, whole batch) and each rank (its slice, under DistributedDataParallel).
"""

from __future__ import annotations

import torch

from audit.inputs.case import Case
from audit.inputs.variants import resized


def batch_dim(entry, world: int) -> str | None:
    """The symbolic dim to split: the first dim of a floating tensor input whose range reaches ``world``."""
    for _, spec in entry.tensor_inputs:
        if not spec.differentiable:  # pinned to an integer or bool dtype, or requires_grad: false
            continue
        for size in spec.shape:
            if isinstance(size, str) and entry.dim_range(size)[1] >= world:
                return size
    return None


def even(entry, case: Case, dim: str, world: int) -> Case:
    """``case`` with ``dim`` rounded up to a multiple of ``world`` (within its range, at least ``world``)."""
    sizes = dict(case.dims)
    high = entry.dim_range(dim)[1]
    size = max(world, -(-sizes[dim] // world) * world)
    sizes[dim] = size if size <= high else (high // world) * world
    return resized(entry, case, sizes)


def batched_axes(entry, dim: str) -> dict[int, int]:
    """{argument index: axis of ``dim``} for the tensor inputs that carry it."""
    return {i: list(spec.shape).index(dim) for i, spec in entry.tensor_inputs if dim in spec.shape}


class Harness(torch.nn.Module):
    """The entry with parameters: see the module docstring."""

    def __init__(self, fn, args: list, axes: dict[int, int]):
        super().__init__()
        self.fn, self.axes, self.template = fn, axes, list(args)
        self.weights = torch.nn.ParameterDict()
        for i, arg in enumerate(args):
            if not (isinstance(arg, torch.Tensor) and arg.requires_grad):
                continue
            if i in axes:
                shape = list(arg.shape)
                shape[axes[i]] = 1
                self.weights[str(i)] = torch.nn.Parameter(torch.ones(shape, dtype=arg.dtype, device=arg.device))
            else:
                self.weights[str(i)] = torch.nn.Parameter(arg.detach().clone())

    def forward(self, *data):
        it = iter(data)
        args = []
        for i, template in enumerate(self.template):
            value = next(it) if i in self.axes else template
            if str(i) in self.weights:
                value = value * self.weights[str(i)] if i in self.axes else self.weights[str(i)]
            args.append(value)
        outputs = self.fn(*args)
        outputs = [outputs] if isinstance(outputs, torch.Tensor) else [o for o in outputs if isinstance(o, torch.Tensor)]
        return sum((o ** 2).sum() / 2 for o in outputs if o.is_floating_point())


def data(args: list, axes: dict[int, int], rank: int = 0, world: int = 1) -> list:
    """The batched inputs, detached, sliced to ``rank``'s share (the whole batch for world 1)."""
    found = []
    for i, axis in sorted(axes.items()):
        tensor = args[i].detach()
        found.append(tensor.chunk(world, dim=axis)[rank].contiguous() if world > 1 else tensor)
    return found


def gradients(module: Harness) -> dict[str, list]:
    """Each parameter's gradient, as nested lists (zeros when it received none)."""
    return {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().double().tolist()
            for name, p in module.weights.items()}

"""DistributedDataParallel: the target trained on a batch split across ranks."""

from __future__ import annotations

import torch
from audit.kit.explain import first_line
from audit.kit.tensors import outputs_of


#: What a rank's environment adds: gloo on the loopback interface, one thread.
RANK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}


class Harness(torch.nn.Module):
    """The target with parameters, as the distributed check trains it: an input without the batch axis (``axes``:
    argument -> the axis its batch is split along) becomes a parameter; one with it is data, multiplied by a
    learnable scale (1 along the batch), so that its gradient reaches a parameter too. The loss is
    ``sum(out ** 2) / 2`` over every floating output: a sum over samples, so a batch split across ranks adds up
    to the whole batch."""

    def __init__(self, fn, args: list, axes: dict):
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
        outputs = outputs_of(self.fn(*args))
        return sum((o ** 2).sum() / 2 for o in outputs if o.is_floating_point())


def harness_data(args: list, axes: dict, rank: int = 0, world: int = 1) -> list:
    """The batched inputs, detached, sliced to ``rank``'s share (the whole batch for world 1)."""
    found = []
    for i, axis in sorted(axes.items()):
        tensor = args[i].detach()
        found.append(tensor.chunk(world, dim=axis)[rank].contiguous() if world > 1 else tensor)
    return found


def harness_gradients(module: Harness) -> dict:
    """Each parameter's gradient, as nested float64 lists (zeros when it received none)."""
    return {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().double().tolist()
            for name, p in module.weights.items()}


def whole_batch_gradients(fn, args: list, axes: dict) -> dict:
    """:func:`harness_gradients` of one process on the whole batch ({} when no input requires a gradient)."""
    module = Harness(fn, args, axes)
    if not list(module.parameters()):
        return {}
    module(*harness_data(args, axes)).backward()
    return harness_gradients(module)


def rank_gradients(fn, args: list, axes: dict, rank: int, world: int) -> dict:
    """This rank's :func:`harness_gradients` under DistributedDataParallel (its process group joined) on its share
    of the batch, times ``world`` (DDP averages; the check compares sums)."""
    module = torch.nn.parallel.DistributedDataParallel(Harness(fn, args, axes), find_unused_parameters=True)
    module(*harness_data(args, axes, rank, world)).backward()
    return {name: (torch.tensor(g, dtype=torch.float64) * world).tolist()
            for name, g in harness_gradients(module.module).items()}


def rank_error(exc) -> str:
    """What a rank raised, and where: "Type: first line (at file:line)"."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    first = first_line(exc) if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{where}"

"""What the compile check needs from Dynamo beyond the replay kit's :class:`~audit.kit.compiled.Compiled`: a sweep of
shapes, and Dynamo's refusals as violations."""

from __future__ import annotations

import contextlib

import torch

from audit.inputs.variants import resized
from audit.kit.compiled import Compiled, dynamo_refusal
from audit.core.violation import Violation

__all__ = ["SWEEP", "Compiled", "graph_breaks_explained", "shape_sweep"]

#: Shapes in the sweep; with automatic dynamic shapes, the third new shape must not compile again.
SWEEP = 4
#: Dynamo specialises sizes 0 and 1; the sweep stays at 2 and above.
SPECIALISED = 2


#: The backends whose one-time start-up this process has paid (:func:`warm`).
_WARM: set[str] = set()


def warm(backend: str) -> None:
    """Pay Dynamo's and ``backend``'s one-time start-up (imports, lazy initialisation, for inductor its code
    generator) once in this process, untimed, before any entry's compile is timed: otherwise whichever compile cell a
    worker runs first carries it (about 1 s here, 2 s under load), and a compile time moves with the schedule."""
    if backend in _WARM:
        return
    _WARM.add(backend)
    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    with contextlib.suppress(Exception):  # a backend that cannot compile here: the entry's own compile says so
        torch.compile(lambda t: (t * 2).sin(), backend=backend)(x).sum().backward()


def shape_sweep(entry, case) -> list:
    """(sizes, case) pairs: the drawn case resized through :data:`SWEEP` shapes, each symbolic dim
    stepping through its range at or above 2 (offset per dim, so dims rarely coincide)."""
    sweep = []
    for k in range(SWEEP):
        sizes = {}
        for index, name in enumerate(entry.symbols):
            low, high = entry.dim_range(name)
            start = max(low, SPECIALISED)
            if start > high:
                sizes[name] = high
                continue
            sizes[name] = start + (k + index) % (high - start + 1)
        sweep.append((sizes, resized(entry, case, sizes)))
    return sweep


@contextlib.contextmanager
def graph_breaks_explained():
    """Turn Dynamo's refusals (graph breaks under fullgraph, failed backends) into one-line violations
    (:func:`audit.kit.compiled.dynamo_refusal`)."""
    try:
        yield
    except torch._dynamo.exc.TorchDynamoException as exc:
        raise Violation(dynamo_refusal(exc)) from None

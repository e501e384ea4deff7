"""Central-difference Jacobians, to judge the Jacobians torch.func builds (jacrev, jacfwd)."""

from __future__ import annotations

import torch

from audit.registry.model import Tolerance

#: Step and the tolerance a central difference supports, per dtype; lower precisions are not judged.
STEPS = {
    torch.float64: (1e-6, Tolerance(atol=1e-5, rtol=1e-3)),
    torch.float32: (1e-3, Tolerance(atol=1e-2, rtol=1e-2)),
}
#: Columns (input elements) differenced at most: the first ones, in order; the rest are not compared.
MAX_COLUMNS = 64


def supported(dtype: torch.dtype) -> bool:
    """Whether finite differences in ``dtype`` are accurate enough to judge a Jacobian."""
    return dtype in STEPS


def step(dtype: torch.dtype) -> float:
    """The step central differences take in ``dtype``."""
    return STEPS[dtype][0]


def tolerance(dtype: torch.dtype) -> Tolerance:
    """How far an analytic Jacobian may sit from the central difference in ``dtype``."""
    return STEPS[dtype][1]


def columns(inputs) -> list[tuple[int, int]]:
    """The (input, flat element) pairs that are differenced, at most :data:`MAX_COLUMNS`."""
    pairs = [(j, e) for j, x in enumerate(inputs) for e in range(x.numel())]
    return pairs[:MAX_COLUMNS]


def jacobian(f, inputs) -> dict[tuple[int, int], list[torch.Tensor]]:
    """For each column (input j, element e): d f_i / d x_j[e] for every output i, by central differences.

    ``f`` takes the inputs and returns a tuple of tensors; the inputs are not modified.
    """
    eps = step(inputs[0].dtype)
    base = [x.detach().clone() for x in inputs]
    found = {}
    with torch.no_grad():
        for j, e in columns(base):
            plus = [x.clone() for x in base]
            minus = [x.clone() for x in base]
            plus[j].view(-1)[e] += eps
            minus[j].view(-1)[e] -= eps
            width = plus[j].view(-1)[e] - minus[j].view(-1)[e]  # the step taken: 2 eps rounds at 1e9 (ulp 1.2e-7)
            found[(j, e)] = [(p - m) / width for p, m in zip(f(*plus), f(*minus))]
    return found


def column_of(jac, i: int, j: int, e: int, output_shape, input_numel: int) -> torch.Tensor:
    """Column (j, e) for output i from a torch.func Jacobian ``jac[i][j]`` (shape output + input)."""
    return jac[i][j].reshape(tuple(output_shape) + (input_numel,))[..., e]

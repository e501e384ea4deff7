"""Where the distributed check splits an entry's batch: the dim, the case made even, the axes. The module it
trains (:class:`audit.kit.ddp.Harness`) and the gradients a rank computes (:func:`audit.kit.ddp.rank_gradients`) are the
replay kit's, shared by the check (one process, whole batch), each rank and the replay script."""

from __future__ import annotations

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

"""New cases made from a drawn one: same values rearranged (a batch of samples), or resized to new dims.

Both keep every value the strategy drew, so domains, kinks and valid indices still hold.
"""

from __future__ import annotations

import numpy as np

from audit.inputs.case import Case, TensorArg
from audit.registry.model import Entry, TensorSpec


def rearranged(case: Case, k: int, which) -> Case:
    """Sample ``k`` of a batch: the tensors at ``which`` with their values reordered (0: as drawn,
    odd: reversed, then rolled by ``k // 2``), every other argument unchanged."""
    args = tuple(_reorder(a, k) if i in which and isinstance(a, TensorArg) else a for i, a in enumerate(case.args))
    return Case(case.dims, args, case.layouts, case.in_dims)


def _reorder(arg: TensorArg, k: int) -> TensorArg:
    flat = arg.values.reshape(-1)
    if k % 2:
        flat = flat[::-1]
    flat = np.roll(flat, k // 2)
    return TensorArg(values=flat.reshape(arg.values.shape).copy(), requires_grad=arg.requires_grad, dtype=arg.dtype)


def resized(entry: Entry, case: Case, sizes: dict) -> Case:
    """``case`` with its symbolic dims set to ``sizes``; values repeat cyclically to fill new shapes."""
    args = []
    for spec, arg in zip(entry.inputs, case.args):
        if not (isinstance(spec, TensorSpec) and isinstance(arg, TensorArg)):
            args.append(arg)
            continue
        shape = tuple(sizes[s] if isinstance(s, str) else s for s in spec.shape)
        source = arg.values.reshape(-1) if arg.values.size else np.full(1, _inside(spec), arg.values.dtype)
        args.append(TensorArg(values=np.resize(source, shape), requires_grad=arg.requires_grad, dtype=arg.dtype))
    return Case(tuple((name, sizes.get(name, size)) for name, size in case.dims), tuple(args))


def _inside(spec: TensorSpec) -> float:
    from audit.inputs.strategies import away_from_kinks

    low, high = spec.domain
    return away_from_kinks((low + high) / 2, spec)

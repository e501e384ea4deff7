"""New cases made from a drawn one: resized to new dims, keeping every value the strategy drew, so domains, kinks
and valid indices still hold. (The vmap check's samples, the same values rearranged, are made from the arguments
themselves: :func:`audit.checks.vmap.sample_of`.)"""

from __future__ import annotations

import numpy as np

from audit.inputs.case import Case, TensorArg
from audit.registry.model import Entry, TensorSpec


def resized(entry: Entry, case: Case, sizes: dict) -> Case:
    """``case`` with its symbolic dims set to ``sizes``; values repeat cyclically to fill new shapes."""
    args = []
    for spec, arg in zip(entry.inputs, case.args):
        if not (isinstance(spec, TensorSpec) and isinstance(arg, TensorArg)):
            args.append(arg)
            continue
        shape = tuple(sizes[s] if isinstance(s, str) else s for s in spec.shape)
        filler = spec.constant if isinstance(spec.constant, (int, float)) else _inside(spec)
        source = arg.values.reshape(-1) if arg.values.size else np.full(1, filler, arg.values.dtype)
        args.append(TensorArg(values=np.resize(source, shape), requires_grad=arg.requires_grad, dtype=arg.dtype))
    return Case(tuple((name, sizes.get(name, size)) for name, size in case.dims), tuple(args))


def _inside(spec: TensorSpec) -> float:
    from audit.inputs.strategies import away_from_kinks

    low, high = spec.domain
    return away_from_kinks((low + high) / 2, spec)

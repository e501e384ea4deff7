"""Hypothesis strategies for an entry's arguments: shared symbolic dims, domains, kinks avoided."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from audit.inputs.case import Case, TensorArg, ValueArg
from audit.registry.model import FLOAT_DTYPES, Entry, TensorSpec

#: Drawn values keep this fraction of the domain's width away from each kink; wide enough for
#: float32 finite differences (eps 1e-3) and far wider than float64 ones (eps 1e-6).
KINK_MARGIN = 0.01


#: Non-contiguous layouts, simplest first (shrinking prefers the earlier ones).
LAYOUTS = ("transposed", "strided", "offset", "channels_last")


def cases(entry: Entry, *, empty: bool = False, layouts: bool | str = False,
          batched: bool = False, min_batch: int = 0) -> st.SearchStrategy[Case]:
    """Cases for ``entry``; with ``empty``, one dim that may be 0 is 0; with ``layouts``, every tensor
    argument gets a non-contiguous layout (transposed, step-sliced, storage offset, channels_last), and
    with ``layouts="mixed"`` it may also stay contiguous; with ``batched``, every tensor argument gets a
    vmap batch position (``None``: unbatched; the first tensor is always batched); with ``min_batch``, the
    entry's ``batch`` dim is drawn at least that large (within its range)."""
    return _case(entry, empty, layouts, batched, min_batch)


def for_check(entry: Entry, check) -> st.SearchStrategy[Case]:
    """The cases a :class:`~audit.catalog.interface.Check` asks for."""
    return cases(entry, empty=check.empty, layouts=check.layouts, batched=check.batched, min_batch=check.min_batch)


def layouts_for(ndim: int) -> tuple[str, ...]:
    """The layouts a tensor of ``ndim`` dims can take."""
    return tuple(name for name in LAYOUTS if (name != "transposed" or ndim >= 2)
                 and (name != "channels_last" or ndim == 4) and (name != "strided" or ndim >= 1))


@st.composite
def _case(draw, entry: Entry, empty: bool, layouts: bool | str = False, batched: bool = False,
          min_batch: int = 0) -> Case:
    sizes = {name: draw(st.integers(*_range(entry, name, min_batch))) for name in entry.symbols}
    zeroable = [name for name in entry.symbols if entry.dim_range(name)[0] == 0]
    if empty and zeroable:
        sizes[draw(st.sampled_from(zeroable))] = 0
    args = tuple(_arg(draw, spec, sizes, entry.supports.dtypes) for spec in entry.inputs)
    first = ("contiguous",) if layouts == "mixed" else ()
    drawn = tuple(draw(st.sampled_from(first + layouts_for(a.values.ndim))) if isinstance(a, TensorArg) else None
                  for a in args) if layouts else ()
    return Case(dims=tuple(sizes.items()), args=args, layouts=drawn,
                in_dims=_in_dims(draw, args) if batched else ())


def _range(entry: Entry, name: str, min_batch: int) -> tuple[int, int]:
    low, high = entry.dim_range(name)
    return (min(max(low, min_batch), high), high) if name == entry.batch else (low, high)


def _in_dims(draw, args) -> tuple:
    """A batch position per tensor argument (0 first, so shrinking prefers it); None for the rest."""
    tensors = [i for i, a in enumerate(args) if isinstance(a, TensorArg)]
    positions: list[int | None] = []
    for i, arg in enumerate(args):
        if i not in tensors:
            positions.append(None)
            continue
        choices: list[int | None] = list(range(arg.values.ndim + 1))
        if i != tensors[0]:
            choices.insert(1, None)
        positions.append(draw(st.sampled_from(choices)))
    return tuple(positions)


def _arg(draw, spec, sizes: dict, dtypes: tuple[str, ...]):
    if not isinstance(spec, TensorSpec):
        return ValueArg(spec.value)
    shape = tuple(sizes[s] if isinstance(s, str) else s for s in spec.shape)
    if spec.constant is not None:
        return TensorArg(values=spec.constant_values(shape), requires_grad=spec.differentiable, dtype=spec.dtype)
    integral = spec.dtype is not None and spec.dtype not in FLOAT_DTYPES
    dtype = np.int64 if integral else np.float64
    values = draw(hnp.arrays(dtype, shape, elements=elements(spec, integral)))
    if not integral and spec.is_complex(dtypes):  # the imaginary parts, drawn like the real ones
        values = values + 1j * draw(hnp.arrays(dtype, shape, elements=elements(spec)))
    if not spec.sparse_layout:
        return TensorArg(values=values, requires_grad=spec.differentiable, dtype=spec.dtype)
    return TensorArg(values=values, requires_grad=spec.differentiable, dtype=spec.dtype,
                     sparse_layout=spec.sparse_layout, pattern=draw(patterns(shape, spec.density)))


def patterns(shape: tuple, density: float) -> st.SearchStrategy[np.ndarray]:
    """Which elements of a sparse input are specified: each with chance ``density``, independently, from a seed
    Hypothesis draws (its own per-element draws lean towards small values, which would not honour the density;
    the seed shrinks towards 0 and fixes the pattern), and at least one in a non-empty tensor (a sparse tensor
    that specifies nothing says nothing about its gradient)."""
    return st.integers(0, 2**32 - 1).map(lambda s: _at_least_one(np.random.default_rng(s).random(shape) < density))


def _at_least_one(pattern: np.ndarray) -> np.ndarray:
    """``pattern``, with its first element specified when none is."""
    if pattern.size and not pattern.any():
        pattern.reshape(-1)[0] = True
    return pattern


def elements(spec: TensorSpec, integral: bool = False) -> st.SearchStrategy:
    """Scalars in the spec's domain, pushed away from its kinks."""
    low, high = spec.domain
    if integral:
        return st.integers(int(np.ceil(low)), int(np.floor(high)))
    floats = st.floats(low, high, allow_nan=False, allow_infinity=False, allow_subnormal=False)
    return floats.map(lambda v: away_from_kinks(v, spec)) if spec.kinks else floats


def away_from_kinks(value: float, spec: TensorSpec) -> float:
    """``value`` moved at least the kink margin away from every kink, staying in the domain."""
    low, high = spec.domain
    margin = KINK_MARGIN * (high - low)
    for kink in spec.kinks:
        if abs(value - kink) < margin:
            up, down = kink + margin, kink - margin
            value = up if (value >= kink and up <= high) or down < low else down
    return float(min(max(value, low), high))

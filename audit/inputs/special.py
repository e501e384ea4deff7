"""Special points, searched on purpose: structured cases a gradient check tries before its random draws.

Random draws never have equal singular values, a rotation, or two equal arguments, and that is where
gradient bugs hide: a backward that drops the 1/(s_i² - s_j²) terms where singular values coincide is
wrong at every rotation, a distance whose gradient divides by the distance is NaN where its two arguments
are equal. Each case here is a deterministic function of the entry alone (sizes, shapes, domains), so a
seed fixes the whole search, and there are few of them (one per kind that applies, duplicates dropped):
a few examples, not a second search. Last, the largest sizes the dims allow (within a budget of elements): the
remainder of a tiled loop and the top of a range, where random draws seldom go. Where such a point has no
derivative (a kink, a tie), the smoothness probe excuses the disagreement; a wrong gradient at a smooth one
fails.
"""

from __future__ import annotations

import json
from typing import TypeGuard

import numpy as np

from audit.inputs.case import Case, TensorArg, ValueArg
from audit.inputs.strategies import KINK_MARGIN, away_from_kinks
from audit.registry.model import FLOAT_DTYPES, Entry, TensorSpec, ValueSpec

#: The side of a square matrix is tried at this size (within its range): 3x3 matrices have room for a repeated
#: singular value beside a distinct one, and a rotation in a plane beside a fixed axis. Other dims at SMALL.
SIZE = 3
SMALL = 2
#: The case of the largest sizes holds at most this many elements over its inputs (see :func:`_largest`).
LARGEST_ELEMENTS = 256
#: The angle of the plane rotation tried, in radians: no multiple of pi/2, so no entry is 0 or ±1.
ANGLE = 0.6


def special_for(entry: Entry, check) -> tuple[Case, ...]:
    """The special cases a :class:`~audit.catalog.interface.Check` asks for (``special``): none unless it does."""
    return special_cases(entry) if check.special else ()


def special_cases(entry: Entry) -> tuple[Case, ...]:
    """The structured cases for ``entry``, in a fixed order; none for an entry with sparse or non-tensor-only
    inputs it cannot shape (a sparse input's pattern is drawn, not chosen)."""
    if entry.sparse or not entry.tensor_inputs:
        return ()
    sizes = {name: _size(entry, name) for name in entry.symbols}
    shapes = [_shape(spec, sizes) if isinstance(spec, TensorSpec) else None for spec in entry.inputs]
    base = [_generic(spec, shape, i) if shape is not None else None for i, (spec, shape) in
            enumerate(zip(entry.inputs, shapes))]
    found: dict[str, Case] = {}
    for kind in KINDS:
        values = _kind(kind, entry, shapes, base)
        if values is not None:
            case = _case(entry, sizes, values)
            found.setdefault(json.dumps(case.to_json()), case)
    largest = _largest(entry)
    if largest != sizes:
        case = _case(entry, largest, [_generic(spec, _shape(spec, largest), i) if isinstance(spec, TensorSpec)
                                      else None for i, spec in enumerate(entry.inputs)])
        found.setdefault(json.dumps(case.to_json()), case)
    return tuple(found.values())


def plain_cases(entry: Entry, seed: int) -> tuple[Case, ...]:
    """Plain values drawn from ``seed`` (and each input's position) at the small sizes, then at the largest sizes
    the dims allow: what an upgrade's behaviour record evaluates (:mod:`audit.behaviour`). A function of the
    registry and the seed alone, never of a search, so two environments evaluate the same inputs; none for an
    entry without a dense tensor input it can shape."""
    if entry.sparse or not entry.tensor_inputs:
        return ()
    small = {name: _size(entry, name) for name in entry.symbols}
    found: dict[str, Case] = {}
    for number, sizes in enumerate((small, _largest(entry))):
        values = [_generic(spec, _shape(spec, sizes), i, (seed, number)) if isinstance(spec, TensorSpec) else None
                  for i, spec in enumerate(entry.inputs)]
        case = _case(entry, sizes, values)
        found.setdefault(json.dumps(case.to_json()), case)
    return tuple(found.values())


def _shape(spec: TensorSpec, sizes: dict) -> tuple:
    return tuple(sizes[s] if isinstance(s, str) else s for s in spec.shape)


def _largest(entry: Entry) -> dict:
    """Every dim at the top of its range, where random draws seldom go (Hypothesis favours small sizes) and a
    tiled backward takes its remainder path; then, until the inputs hold at most :data:`LARGEST_ELEMENTS` elements
    (finite differences stay cheap), the largest outer dim halved, never under its range, and only once every outer
    dim is at its least the largest innermost one (the last dim of an input, which kernels tile)."""
    sizes = {name: entry.dim_range(name)[1] for name in entry.symbols}
    inner = {spec.shape[-1] for _, spec in entry.tensor_inputs if spec.shape and isinstance(spec.shape[-1], str)}
    while sum(int(np.prod(_shape(spec, sizes))) for _, spec in entry.tensor_inputs) > LARGEST_ELEMENTS:
        movable = [n for n in sizes if sizes[n] > entry.dim_range(n)[0]]
        outer = [n for n in movable if n not in inner]
        name = max(outer or movable, key=lambda n: sizes[n], default=None)
        if name is None:
            break
        sizes[name] = max(entry.dim_range(name)[0], sizes[name] // 2)
    return sizes


def _size(entry: Entry, name: str) -> int:
    """:data:`SIZE` for the side of a square matrix, else :data:`SMALL` (the cost of gradcheck grows with the
    number of elements), within the dim's range."""
    low, high = entry.dim_range(name)
    return min(max(low, SIZE if name in _square_sides(entry) else SMALL), high)


def _square_sides(entry: Entry) -> set:
    return {spec.shape[-1] for _, spec in entry.tensor_inputs
            if len(spec.shape) >= 2 and isinstance(spec.shape[-1], str) and spec.shape[-1] == spec.shape[-2]}


def _kind(kind: str, entry: Entry, shapes, base):
    """Every input's values for ``kind``: the kind's structure where it applies (inside the input's domain),
    the generic values elsewhere; None when it applies to no input."""
    if kind == "equal arguments":
        return _equal_arguments(entry, shapes, base)
    values, used = list(base), False
    for i, (spec, shape) in enumerate(zip(entry.inputs, shapes)):
        if not _shapeable(spec) or shape is None:
            continue
        made = _structured(kind, spec, shape)
        if made is not None and _inside(made, spec):
            values[i], used = made, True
    return values if used else None


def _equal_arguments(entry: Entry, shapes, base):
    """Each differentiable input equal to the first earlier one of its shape (x == y); None without such a pair."""
    values, used = list(base), False
    for i, (spec, shape) in enumerate(zip(entry.inputs, shapes)):
        if not _shapeable(spec):
            continue
        for j in range(i):
            if _shapeable(entry.inputs[j]) and shapes[j] == shape and _inside(values[j], spec):
                values[i], used = values[j].copy(), True
                break
    return values if used else None


def _shapeable(spec: TensorSpec | ValueSpec) -> TypeGuard[TensorSpec]:
    """A dense floating input the audit differentiates: the special points are for it."""
    return isinstance(spec, TensorSpec) and spec.differentiable and not spec.sparse_layout and (
        spec.dtype is None or spec.dtype in FLOAT_DTYPES) and spec.constant is None


def _structured(kind: str, spec: TensorSpec, shape: tuple):
    """The values of one input for ``kind``, or None where the kind has no such shape (a matrix kind on a
    vector, a bound that is infinite)."""
    low, high = spec.domain
    if kind in SCALAR_KINDS:
        value = {"zeros": 0.0, "all equal": _inner(spec), "lower bound": low, "upper bound": high}[kind]
        return np.full(shape, value, dtype=np.float64) if np.isfinite(value) else None
    if len(shape) < 2 or shape[-1] < 2 or shape[-2] < 2:
        return None
    if kind == "identity":
        return np.broadcast_to(np.eye(shape[-2], shape[-1]), shape).copy()
    if shape[-1] != shape[-2]:
        return None
    return np.broadcast_to(MATRICES[kind](shape[-1]), shape).copy()


def _inner(spec: TensorSpec) -> float:
    """A value inside the domain, off 0 and off every kink: 0.5 where it can be."""
    low, high = spec.domain
    value = min(max(0.5, low), high) if np.isfinite(low) or np.isfinite(high) else 0.5
    return away_from_kinks(value, spec) if spec.kinks else value


def _rotation(n: int) -> np.ndarray:
    """A rotation by :data:`ANGLE` in the plane of the first two axes (determinant 1, singular values all 1)."""
    m = np.eye(n)
    c, s = np.cos(ANGLE), np.sin(ANGLE)
    m[:2, :2] = [[c, -s], [s, c]]
    return m


def _reflection(n: int) -> np.ndarray:
    """A Householder reflection I - 2vvᵀ: orthogonal, symmetric, determinant -1, no entry 0 for n = 3."""
    v = np.arange(1.0, n + 1.0)
    v /= np.linalg.norm(v)
    return np.eye(n) - 2.0 * np.outer(v, v)


def _repeated_singular_values(n: int) -> np.ndarray:
    """R diag(0.8, 0.8, 0.3, ...) Hᵀ: its two largest singular values equal, the rest distinct (R a rotation, H a
    reflection, so neither factor is the identity)."""
    values = np.array([0.8, 0.8] + [0.3 / k for k in range(1, n - 1)])
    return _rotation(n) @ np.diag(values) @ _reflection(n).T


def _repeated_eigenvalues(n: int) -> np.ndarray:
    """H diag(0.6, 0.6, 0.2, ...) Hᵀ: symmetric, its two largest eigenvalues equal."""
    values = np.array([0.6, 0.6] + [0.2 / k for k in range(1, n - 1)])
    q = _reflection(n) @ _rotation(n)
    return q @ np.diag(values) @ q.T


MATRICES = {
    "scaled identity": lambda n: 0.5 * np.eye(n),
    "rotation": _rotation,
    "orthogonal": _reflection,
    "repeated singular values": _repeated_singular_values,
    "repeated eigenvalues": _repeated_eigenvalues,
}
SCALAR_KINDS = ("zeros", "all equal", "lower bound", "upper bound")
#: Every kind, in the order tried.
KINDS = (*SCALAR_KINDS, "identity", *MATRICES, "equal arguments")


def _inside(values: np.ndarray, spec: TensorSpec) -> bool:
    """Whether every value lies in the input's domain and off its declared kinks (as drawn values do)."""
    low, high = spec.domain
    margin = KINK_MARGIN * (high - low)
    return bool(np.all(values >= low) and np.all(values <= high)
                and all(np.all(np.abs(values - kink) >= margin) for kink in spec.kinks))


def _generic(spec, shape: tuple, index: int, seed: tuple[int, int] | None = None) -> np.ndarray:
    """Plain values for an input a kind leaves alone: drawn from a generator seeded by its position (the same
    for every kind, so that only the structured input changes) and ``seed`` if given (a run's seed and a case's
    number: each case its own values, not a prefix of another's), inside its domain and off its kinks."""
    if spec.constant is not None:
        return spec.constant_values(shape)
    low, high = _unit_part(*spec.domain)
    values = np.random.default_rng(index if seed is None else [*seed, index]).uniform(low, high, size=shape)
    if spec.dtype is not None and spec.dtype not in FLOAT_DTYPES:
        return np.clip(np.round(values), np.ceil(spec.domain[0]), np.floor(spec.domain[1])).astype(np.int64)
    if spec.kinks:
        values = np.vectorize(lambda v: away_from_kinks(float(v), spec), otypes=[np.float64])(values)
    return values


def _unit_part(low: float, high: float) -> tuple[float, float]:
    """The part of the domain inside [-1, 1], or a unit interval at its nearer end when there is none."""
    if high <= -1.0:
        return high - 1.0, high
    if low >= 1.0:
        return low, low + 1.0
    return max(low, -1.0), min(high, 1.0)


def _case(entry: Entry, sizes: dict, values: list) -> Case:
    args: list[TensorArg | ValueArg] = []
    for spec, v in zip(entry.inputs, values):
        if not isinstance(spec, TensorSpec):
            args.append(ValueArg(spec.value))
            continue
        if spec.is_complex(entry.supports.dtypes) and v.dtype != np.int64:
            v = v.astype(np.complex128)
        args.append(TensorArg(values=v, requires_grad=spec.differentiable, dtype=spec.dtype))
    return Case(dims=tuple(sizes.items()), args=tuple(args))

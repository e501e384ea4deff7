"""Registry entries as frozen data; nothing here imports torch."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from audit.core.contract import COMPLEX_DTYPES, DTYPE_ORDER, REAL_PART
from audit.kit.tolerance import Tolerance

DEFAULT_DOMAIN = (-1.0, 1.0)
DEFAULT_DIM_RANGE = (1, 4)
DEFAULT_DTYPES = ("float64", "float32")
DEFAULT_DEVICES = ("cpu",)
#: The dtypes autograd differentiates: real floating and complex (an input pinned to another is not).
FLOAT_DTYPES = DTYPE_ORDER
#: The sparse layouts an input may declare (``layout:``); an input without one is dense (strided).
SPARSE_LAYOUTS = ("sparse_coo", "sparse_csr")
#: The share of a sparse input's elements that are specified (in its pattern) unless ``density:`` says.
DEFAULT_DENSITY = 0.3


class EntryKind(str, enum.Enum):
    """What an entry's target is, and so how it is called (the registry's ``kind:``)."""

    FUNCTION = "function"  #: a torch.autograd.Function subclass, called through ``.apply``
    OP = "op"  #: an operator reached through torch.ops
    CALLABLE = "callable"  #: any Python function of tensors
    MODULE = "module"  #: a factory of an nn.Module, called on drawn tensors
    MODEL = "model"  #: a factory of (model, make_batch, loss), trained a few steps

    # The registry's spelling wherever a kind is written: reports, messages, and the literal that replay
    # scripts embed with ``!r`` (``kind = 'op'``, not ``<EntryKind.OP: 'op'>``).
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    def __repr__(self) -> str:
        return repr(self.value)


#: The kind of an entry that does not say.
DEFAULT_KIND = EntryKind.FUNCTION
#: The layers above the operators: their target is a factory (of a module, of a model's training triple).
LAYER_KINDS = (EntryKind.MODULE, EntryKind.MODEL)


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument: its shape (ints and symbolic dims), value domain and kinks; ``sparse_layout`` (the
    registry's ``layout:``, one of :data:`SPARSE_LAYOUTS`) makes it a sparse tensor whose pattern specifies
    about ``density`` of its elements (None: dense, strided; not the memory layouts checks draw)."""

    shape: tuple[int | str, ...]
    domain: tuple[float, float] = DEFAULT_DOMAIN
    kinks: tuple[float, ...] = ()
    requires_grad: bool = True
    dtype: str | None = None
    sparse_layout: str | None = None
    density: float = DEFAULT_DENSITY
    #: Fixed values instead of drawn ones (``constant:``): a number fills the shape, a tuple gives every value in
    #: C order; None: drawn. The dtype and device follow the cell, as for a drawn input.
    constant: float | tuple[float, ...] | None = None

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbolic dims this input uses."""
        return tuple(s for s in self.shape if isinstance(s, str))

    def constant_values(self, shape: tuple[int, ...]) -> Any:
        """A constant input's values at ``shape`` (a numpy array, float64; int64 for a pinned integer dtype); numpy is
        imported here, not with the model (which nothing here needs it for)."""
        import numpy as np

        kind = np.int64 if self.dtype is not None and self.dtype not in FLOAT_DTYPES else np.float64
        if isinstance(self.constant, tuple):
            return np.asarray(self.constant, dtype=kind).reshape(shape)
        return np.full(shape, self.constant, dtype=kind)

    @property
    def differentiable(self) -> bool:
        """Whether the audit asks for a gradient with respect to this input."""
        return self.requires_grad and (self.dtype is None or self.dtype in FLOAT_DTYPES)

    def is_complex(self, cell_dtypes: Iterable[str]) -> bool:
        """Whether this input is drawn complex: pinned complex, or unpinned in an entry claiming complex dtypes."""
        return self.dtype in COMPLEX_DTYPES if self.dtype else any(d in COMPLEX_DTYPES for d in cell_dtypes)


@dataclass(frozen=True)
class ValueSpec:
    """A non-tensor argument, passed through unchanged."""

    value: object


@dataclass(frozen=True)
class Supports:
    """What the owner claims; every claim is verified."""

    dtypes: tuple[str, ...] = DEFAULT_DTYPES
    devices: tuple[str, ...] = DEFAULT_DEVICES
    double_backward: bool = False
    forward_ad: bool = False
    vmap: bool = False
    compile: bool | str = False  # True, or "fullgraph": one graph, a graph break fails
    autocast: bool = False
    deterministic: bool = True
    checkpoint: bool = True
    noncontiguous: bool = True
    export: bool = False
    distributed: bool = False


@dataclass(frozen=True)
class ToleranceOverride:
    """An entry's ``tolerance`` for one dtype: the keys it gives; each check's own default fills the rest
    (``{atol: 1e-3}`` alone keeps the comparison's rtol, and gradcheck's stays gradcheck's)."""

    atol: float | None = None
    rtol: float | None = None
    scale: float | None = None

    def over(self, default: Tolerance) -> Tolerance:
        """``default`` with the keys this override gives."""
        given = {k: v for k, v in (("atol", self.atol), ("rtol", self.rtol), ("scale", self.scale)) if v is not None}
        return replace(default, **given)


#: Units of a low-precision dtype's precision (its eps) a correct result may be off by, as a share of the
#: tensor's largest value. Measured on correct code (softmax, logsumexp, layer norm, sparsemax, centering,
#: Gram matrices; shapes 3x5 to 2x64, bench in docs/checks.md, Half precision): up to 5.7 eps, so 8 leaves
#: room, while a wrong half-precision path (a constant off by 3% in float16, garbage, an overflow) stays far
#: outside.
LOW_PRECISION_EPS = 8
_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}

#: The comparison in each dtype unless the entry overrides it: torch.testing's defaults, plus the
#: scale term in float16 and bfloat16 (see :class:`Tolerance`).
DEFAULT_TOLERANCE = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
    "float32": Tolerance(atol=1e-5, rtol=1.3e-6),
    "float16": Tolerance(atol=1e-5, rtol=1e-3, scale=LOW_PRECISION_EPS * _EPS["float16"]),
    "bfloat16": Tolerance(atol=1e-5, rtol=1.6e-2, scale=LOW_PRECISION_EPS * _EPS["bfloat16"]),
}


@dataclass(frozen=True)
class Expectation:
    """A waiver: a known failure (or skip) of one check that must not fail the gate."""

    check: str
    status: str
    reason: str
    until: str | None = None
    dtype: str | None = None
    device: str | None = None

    def covers(self, check: str, dtype: str, device: str) -> bool:
        """Whether this waiver is about that cell."""
        return (self.check == check and self.dtype in (None, dtype)
                and self.device in (None, device))

    def expired(self, today: str) -> bool:
        """Whether ``until`` has passed (dates compare as ISO strings)."""
        return self.until is not None and self.until < today


@dataclass(frozen=True)
class Training:
    """kind model: batch size, steps, SGD learning rate, micro-batches, batches scanned."""

    batch: int = 8
    steps: int = 4
    lr: float = 0.05
    micro_batches: int = 2
    batches: int = 8


@dataclass(frozen=True)
class Entry:
    """One registered Function, op or callable, with its owner and claims."""

    name: str
    owners: tuple[str, ...]
    kind: EntryKind
    target: str
    inputs: tuple[TensorSpec | ValueSpec, ...]
    line: int = 1
    load: tuple[str, ...] = ()
    reference: str | None = None
    proxy: str | None = None  #: "module:function" whose autograd gradient is the intended one (``proxy:``)
    proxy_modes: tuple[str, ...] = ("train", "eval")  #: a module's modes the proxy holds in
    vjp: str | None = None  #: "module:function" giving the intended gradients, a rule of its own (``vjp:``)
    backward_only: bool = False  #: gradients taken with torch.autograd.backward, reading .grad
    triton: str = ""  #: "interpret": Triton kernels, run through Triton's interpreter where no CUDA device is
    dims: tuple[tuple[str, int, int], ...] = ()
    batch: str | None = None
    mutates: tuple[int, ...] = ()
    views: tuple[int, ...] = ()
    supports: Supports = field(default_factory=Supports)
    tolerance: tuple[tuple[str, ToleranceOverride], ...] = ()
    expect: tuple[Expectation, ...] = ()
    checks: tuple[str, ...] = ()
    training: Training = field(default_factory=lambda: Training())

    @property
    def registered_name(self) -> str:
        """The name as the registry spells it: ``audit mutate`` names a mutant's copy of the entry ``NAME#mN``
        (``#`` is no name's), and the copy draws the entry's own inputs."""
        return self.name.partition("#")[0]

    def dim_range(self, name: str) -> tuple[int, int]:
        """The inclusive size range of a symbolic dim."""
        for dim, low, high in self.dims:
            if dim == name:
                return low, high
        return DEFAULT_DIM_RANGE

    @property
    def tensor_inputs(self) -> tuple[tuple[int, TensorSpec], ...]:
        """(position, spec) of each tensor argument."""
        return tuple((i, s) for i, s in enumerate(self.inputs) if isinstance(s, TensorSpec))

    @property
    def symbols(self) -> tuple[str, ...]:
        """Every symbolic dim used, in order of first use."""
        seen: dict[str, None] = {}
        for _, spec in self.tensor_inputs:
            seen.update(dict.fromkeys(spec.symbols))
        return tuple(seen)

    @property
    def sparse(self) -> bool:
        """Whether some input is a sparse tensor (``layout: sparse_coo | sparse_csr``)."""
        return any(spec.sparse_layout for _, spec in self.tensor_inputs)

    @property
    def may_be_empty(self) -> bool:
        """Whether some dim may be drawn as 0, or a fixed size is 0."""
        fixed_zero = any(0 in spec.shape for _, spec in self.tensor_inputs)
        return fixed_zero or any(self.dim_range(s)[0] == 0 for s in self.symbols)

    def tolerance_for(self, dtype: str, default: Tolerance) -> Tolerance:
        """The comparison in ``dtype``: a check's ``default`` with the keys the entry's ``tolerance`` gives; a
        complex dtype without its own takes its real counterpart's (complex64: float32's), as torch.testing does."""
        own = dict(self.tolerance)
        override = own.get(dtype) or own.get(REAL_PART.get(dtype, dtype))
        return override.over(default) if override else default


@dataclass(frozen=True)
class Registry:
    """A loaded registry: its file, its digest, its entries in file order and its run-profile overrides."""

    path: str
    sha256: str
    entries: tuple[Entry, ...]
    profiles: tuple[tuple[str, tuple[tuple[str, object], ...]], ...] = ()

    def entry(self, name: str) -> Entry | None:
        """The entry called ``name``, if any."""
        return next((e for e in self.entries if e.name == name), None)

"""Registry entries as frozen data; nothing here imports torch."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_DOMAIN = (-1.0, 1.0)
DEFAULT_DIM_RANGE = (1, 4)
DEFAULT_DTYPES = ("float64", "float32")
DEFAULT_DEVICES = ("cpu",)
FLOAT_DTYPES = ("float64", "float32", "float16", "bfloat16")
#: The sparse layouts an input may declare (``layout:``); an input without one is dense (strided).
SPARSE_LAYOUTS = ("sparse_coo", "sparse_csr")
#: The share of a sparse input's elements that are specified (in its pattern) unless ``density:`` says.
DEFAULT_DENSITY = 0.3


@dataclass(frozen=True)
class TensorSpec:
    """A tensor argument: its shape (ints and symbolic dims), value domain and kinks; ``sparse_layout`` (the
    registry's ``layout:``, one of :data:`SPARSE_LAYOUTS`) makes it a sparse tensor whose pattern specifies
    about ``density`` of its elements (None: dense, strided; not the memory layouts checks draw)."""

    shape: tuple
    domain: tuple[float, float] = DEFAULT_DOMAIN
    kinks: tuple[float, ...] = ()
    requires_grad: bool = True
    dtype: str | None = None
    sparse_layout: str | None = None
    density: float = DEFAULT_DENSITY

    @property
    def symbols(self) -> tuple[str, ...]:
        """The symbolic dims this input uses."""
        return tuple(s for s in self.shape if isinstance(s, str))

    @property
    def differentiable(self) -> bool:
        """Whether the audit asks for a gradient with respect to this input."""
        return self.requires_grad and (self.dtype is None or self.dtype in FLOAT_DTYPES)


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
class Tolerance:
    """Comparison tolerances for one dtype."""

    atol: float
    rtol: float


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
    kind: str
    target: str
    inputs: tuple
    line: int = 1
    load: tuple[str, ...] = ()
    reference: str | None = None
    dims: tuple[tuple[str, int, int], ...] = ()
    batch: str | None = None
    mutates: tuple[int, ...] = ()
    views: tuple[int, ...] = ()
    supports: Supports = field(default_factory=Supports)
    tolerance: tuple[tuple[str, Tolerance], ...] = ()
    expect: tuple[Expectation, ...] = ()
    checks: tuple[str, ...] = ()
    training: Training = field(default_factory=lambda: Training())

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

    def tolerance_for(self, dtype: str) -> Tolerance | None:
        """The entry's own tolerance for ``dtype``, if it set one."""
        return dict(self.tolerance).get(dtype)


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

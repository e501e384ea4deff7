"""A drawn case: the sizes of the symbolic dims and every argument's values, as plain data."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TensorArg:
    """A tensor argument's values (float64, int64, or complex128 for an input drawn complex: see
    ``TensorSpec.is_complex``), before dtype, device and layout are applied. A sparse one (``sparse_layout``
    sparse_coo or sparse_csr) also has its ``pattern``: a bool array of the values' shape, True where an element
    is specified; the sparse tensor holds ``values`` there (explicit zeros included)."""

    values: np.ndarray
    requires_grad: bool
    dtype: str | None = None
    sparse_layout: str | None = None
    pattern: np.ndarray | None = None

    def to_json(self) -> dict:
        """Shape, pinned dtype and values, exactly (floats keep every bit through repr); complex values as
        their real parts in ``values`` and their imaginary parts in ``imag``; a sparse one's layout and pattern too."""
        flat = self.values.reshape(-1)
        data = {"shape": list(self.values.shape), "dtype": self.dtype, "requires_grad": self.requires_grad,
                "values": flat.real.tolist()}
        if np.iscomplexobj(flat):
            data["imag"] = flat.imag.tolist()
        if self.sparse_layout:
            data.update(sparse_layout=self.sparse_layout, pattern=self._pattern().reshape(-1).tolist())
        return data

    def describe(self) -> str:
        """Its shape, and for a sparse one its layout and how many elements are specified."""
        shape = f"[{', '.join(map(str, self.values.shape))}]"
        if not self.sparse_layout:
            return shape
        pattern = self._pattern()
        return f"{shape} {self.sparse_layout} ({int(pattern.sum())} of {pattern.size} specified)"

    def _pattern(self) -> np.ndarray:
        """A sparse argument's pattern, which it always has."""
        if self.pattern is None:
            raise ValueError(f"a {self.sparse_layout} argument without its pattern")
        return self.pattern


@dataclass(frozen=True)
class ValueArg:
    """A non-tensor argument."""

    value: object

    def to_json(self) -> dict:
        """The value itself."""
        return {"value": self.value}


@dataclass(frozen=True)
class Case:
    """One example: dim sizes by name and the positional arguments."""

    dims: tuple[tuple[str, int], ...]
    args: tuple
    layouts: tuple = ()
    in_dims: tuple = ()

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """How Hypothesis prints a case (it writes each explicit example out, even one that passes): its sizes and
        shapes, not every value (the values' repr cost a millisecond a special point)."""
        printer.text(f"Case{self.describe()}")

    def to_json(self) -> dict:
        """A JSON-ready form that :meth:`from_json` reads back exactly."""
        data = {"dims": dict(self.dims), "args": [a.to_json() for a in self.args]}
        if self.layouts:
            data["layouts"] = list(self.layouts)
        if self.in_dims:
            data["in_dims"] = list(self.in_dims)
        return data

    @staticmethod
    def from_json(data: dict) -> Case:
        """The inverse of :meth:`to_json`."""
        return Case(dims=tuple(data["dims"].items()), args=tuple(_arg(a) for a in data["args"]),
                    layouts=tuple(data.get("layouts", ())), in_dims=tuple(data.get("in_dims", ())))

    def layout(self, index: int) -> str:
        """The memory layout of argument ``index`` (``contiguous`` unless one was drawn)."""
        return self.layouts[index] if self.layouts and self.layouts[index] else "contiguous"

    def _layout_note(self, index: int) -> str:
        layout = self.layout(index)
        return "" if layout == "contiguous" else f" {layout}"

    def describe(self) -> str:
        """A one-line summary: dims and argument shapes."""
        dims = ", ".join(f"{k}={v}" for k, v in self.dims)
        shapes = ", ".join(f"{a.describe()}{self._layout_note(i)}"
                           if isinstance(a, TensorArg) else repr(a.value) for i, a in enumerate(self.args))
        batched = f", vmap in_dims {tuple(self.in_dims)}" if self.in_dims else ""
        return f"({shapes})" + (f" with {dims}" if dims else "") + batched


def _arg(data: dict):
    if "value" in data:
        return ValueArg(data["value"])
    kind = np.int64 if data["dtype"] and not data["dtype"].startswith(("float", "bfloat", "complex")) else np.float64
    values = np.asarray(data["values"], dtype=kind).reshape(data["shape"])
    if "imag" in data:
        values = values + 1j * np.asarray(data["imag"], dtype=np.float64).reshape(data["shape"])
    pattern = np.asarray(data["pattern"], dtype=bool).reshape(data["shape"]) if "pattern" in data else None
    return TensorArg(values=values, requires_grad=data["requires_grad"], dtype=data["dtype"],
                     sparse_layout=data.get("sparse_layout"), pattern=pattern)

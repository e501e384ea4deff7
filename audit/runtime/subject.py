"""The thing a check examines: one target at one dtype and device, with fresh arguments per call."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from audit.core.contract import real_counterpart
from audit.inputs.case import Case, TensorArg
from audit.inputs.sparse import sparse_from, through_dense
from audit.kit import calls
from audit.kit.tolerance import Tolerance
from audit.registry.model import DEFAULT_TOLERANCE, Entry
from audit.runtime import randomness
from audit.runtime.options import RunOptions
from audit.runtime.target import Target
from audit.kit.tensors import floating

#: For float64 results compared with a float64 reference: tight enough that float32 arithmetic
#: hidden under a float64 input (relative error about 1e-8) is caught.
TIGHT_FLOAT64 = Tolerance(atol=1e-10, rtol=1e-9)


@dataclass(frozen=True)
class Subject:
    """An entry's target at a dtype and device; builds arguments and calls the target.

    One subject lives for one cell: ``state`` is the cell's scratch space (a check may keep what it
    built once, such as a compiled function, across examples) and ``metrics`` what the check reports
    beside its verdict (compile time, graph count); both start empty.
    """

    entry: Entry
    target: Target
    dtype: str
    device: str
    seed: int = 0
    options: RunOptions = field(default_factory=RunOptions)
    state: dict = field(default_factory=dict, compare=False, repr=False)
    metrics: dict = field(default_factory=dict, compare=False, repr=False)

    def not_run(self, part: str, reason: str, *, judged: str) -> None:
        """Record that ``part`` of the check could not run here (this torch cannot perform it, or refuses the
        target) while ``judged`` did: a cell that holds then says what it judged, and why the rest did not run on
        this torch, never a silent pass (``metrics.not_run``, ``metrics.judged``)."""
        self.metrics.setdefault("not_run", {})[part] = f"{reason} (torch {torch.__version__})"
        self.metrics["judged"] = judged

    def args(self, case: Case, dtype: str | None = None, device: str | None = None) -> list:
        """Fresh arguments for ``case``: leaf tensors, ``requires_grad`` as the registry says."""
        dtype, device = dtype or self.dtype, device or self.device
        return [_tensor(a, dtype, device, case.layout(i)) if isinstance(a, TensorArg) else a.value
                for i, a in enumerate(case.args)]

    def contiguous_args(self, case: Case, dtype: str | None = None) -> list:
        """Like :meth:`args`, ignoring any drawn layout."""
        return self.args(Case(case.dims, case.args), dtype)

    def call(self, args: list):
        """The target on ``args``, guarded (see :meth:`guard`)."""
        return self.evaluate(*args)

    def evaluate(self, *args: Any) -> Any:
        """The target on ``args``, guarded (see :meth:`guard`): what every check calls."""
        return self.guard(self.target.fn)(*args)

    def evaluate_reference(self, *args: Any) -> Any:
        """The reference on ``args``, guarded like the target, so that it draws the target's noise; a sparse
        argument reaches it dense, and its gradient comes back on the argument's pattern (see ``through_dense``)."""
        return self.guard(through_dense(self.target.reference))(*args)

    def evaluate_proxy(self, *args: Any) -> Any:
        """The entry's proxy (whose autograd gradient is the intended one) on ``args``, guarded like the target."""
        return self.guard(through_dense(self.target.proxy))(*args)

    def guard(self, fn: Callable, *, clone: bool = True, reseed: bool = True, canonical: bool = True) -> Callable:
        """``fn`` called as real code calls it, from the same random stream at every evaluation.

        ``clone``: each leaf tensor at a ``mutates`` position is replaced by a differentiable clone, so that an
        in-place Function writes a non-leaf (as in a real graph) and gradients reach the audit's leaf
        through CloneBackward. ``reseed`` and ``canonical``: see :meth:`stream`. saved_tensors turns
        cloning off (it modifies its own clones); determinism turns reseeding off (two runs must draw
        apart); compile and export turn canonical draws off (a dispatch mode does not trace). The alias
        check calls the target unguarded: it clones by itself, to watch the write.
        """
        def guarded(*args):
            with self.stream(reseed=reseed, canonical=canonical):
                return fn(*(self.writable(args) if clone else args))

        return guarded

    def writable(self, args) -> list:
        """``args`` with each leaf tensor at a ``mutates`` position replaced by its (differentiable) clone: the
        audit's own tensors are never written; a tensor a check derived itself passes as it is."""
        mutates = self.entry.mutates
        return [a.clone() if i in mutates and isinstance(a, torch.Tensor) and a.is_leaf else a
                for i, a in enumerate(args)]

    def reference_draws_alike(self, case: Case) -> bool:
        """Whether comparing the target with its reference draw by draw means something: always for a
        deterministic entry; for a stochastic one, only when both make the same random draws (op and
        shape, in order) on ``case``. A reference that draws otherwise (``bernoulli`` where the target
        draws ``rand``, or once where it draws twice) samples the same distribution with other numbers:
        the ``statistics`` check compares it by distribution, and the fixed-stream checks do not compare
        it at all (a failure there would be a false alarm)."""
        if self.entry.supports.deterministic or self.target.reference is None:
            return True
        found = self.state.setdefault("draws_alike", {})
        key = case.describe()
        if key not in found:
            found[key] = _draws(self.evaluate, self.args(case)) == _draws(self.evaluate_reference, self.args(case))
            if not found[key]:
                self.metrics["reference"] = ("draws its random numbers otherwise than the target: not compared "
                                             "draw by draw (statistics compares the distributions)")
        return found[key]

    @contextmanager
    def stream(self, *, reseed: bool = True, canonical: bool = True):
        """torch's global generators re-seeded to the cell's seed; for an entry that claims
        ``supports.deterministic: false``, draws made the same in every dtype, layout and device
        (:mod:`audit.runtime.randomness`)."""
        if reseed:
            calls.reseed(self.seed)
        if not canonical or self.entry.supports.deterministic:
            yield
            return
        with randomness.CanonicalDraws():
            yield

    @property
    def fn(self):
        """The callable itself at this cell's dtype and device: for a module, the module instance (what
        torch.compile and torch.export should trace), else the target's callable."""
        maker = self.target.fn
        if hasattr(maker, "module") and callable(getattr(maker, "fresh", None)):
            return maker.module(getattr(torch, self.dtype), self.device)
        return maker

    def tolerance(self, dtype: str | None = None, *, tight: bool = False) -> Tolerance:
        """The entry's tolerance for ``dtype``, else torch.testing's (tight float64 on request)."""
        dtype = dtype or self.dtype
        real = real_counterpart(dtype)  # complex compares as its parts' dtype (torch.testing does too)
        default = TIGHT_FLOAT64 if tight and real == "float64" else DEFAULT_TOLERANCE[real]
        return self.entry.tolerance_for(dtype, default)


def _tensor(arg: TensorArg, dtype: str, device: str, layout: str = "contiguous") -> torch.Tensor:
    values = torch.from_numpy(np.array(arg.values, order="C"))  # keeps 0-d arrays 0-d
    if arg.sparse_layout:  # its own layout: the drawn memory layouts are for strided tensors
        dense = values.to(dtype=getattr(torch, arg.dtype or dtype), device=device)
        pattern = torch.from_numpy(np.array(arg.pattern, order="C")).to(device)
        return sparse_from(dense, pattern, arg.sparse_layout).requires_grad_(arg.requires_grad)
    tensor = laid_out(values.shape, getattr(torch, arg.dtype or dtype), device, layout)
    if values.is_complex() and not tensor.is_complex():  # a real cell of an entry that also claims complex
        values = values.real
    with torch.no_grad():
        tensor.copy_(values)
    return tensor.requires_grad_(arg.requires_grad and floating(tensor))


def _draws(fn, args) -> list:
    """The random draws ``fn(*args)`` makes (see :class:`~audit.runtime.randomness.RecordedDraws`), up to where it
    raises: a target that raises is the property's to report (this is asked again while its failure's script is
    written, outside the property), and what it drew before the raise is still its draws."""
    with torch.no_grad(), randomness.RecordedDraws() as recorded, contextlib.suppress(Exception):
        fn(*args)  # a raise is the property's finding, not this question's
    return recorded.draws


def laid_out(shape, dtype, device, layout: str) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` with the named memory layout (never stride 0)."""
    shape = tuple(shape)
    if layout == "transposed" and len(shape) >= 2:
        return torch.empty(shape[::-1], dtype=dtype, device=device).permute(*reversed(range(len(shape))))
    # The gaps a strided or offset layout leaves are zeros, not uninitialised memory: code that ignores strides
    # reads the same wrong values in the cell, in its replay and in every run, whatever the allocator reused.
    if layout == "strided" and shape:
        return torch.zeros(shape[:-1] + (2 * shape[-1],), dtype=dtype, device=device)[..., ::2]
    if layout == "offset":
        numel = int(np.prod(shape)) if shape else 1
        flat = torch.zeros(numel + 3, dtype=dtype, device=device)
        return flat[3:].view(shape)
    if layout == "channels_last" and len(shape) == 4:
        return torch.empty(shape, dtype=dtype, device=device).contiguous(memory_format=torch.channels_last)
    # torch.empty gives the standard contiguous strides even for empty shapes (numpy may not).
    return torch.empty(shape, dtype=dtype, device=device)

"""The random stream a target sees: the same at every evaluation of a case, in any dtype, layout or device.

Two measures, both applied by :meth:`audit.runtime.subject.Subject.guard`:

- :func:`audit.kit.calls.reseed` before every evaluation puts torch's global CPU generator (and CUDA's, once
  initialised) back to the cell's seed, so finite differences, a float64 rerun and a rerun after an in-place write all
  see the noise the first call saw.
- :class:`CanonicalDraws`, for entries that claim ``supports.deterministic: false``, makes each of torch's
  random draws (``randn_like``, ``bernoulli_``, dropout, ...) in float64, contiguous, on the CPU, then casts
  and lays the numbers out as the call asked. torch itself draws float32 and float64 differently (CPU
  ``normal_`` from 16 elements on), fills ``*_like`` tensors in memory order (a transposed input gets its
  noise transposed) and draws other numbers on CUDA; without this the dtype, noncontiguous and device
  checks would compare two different samples of the noise.

Not controlled: Python's and numpy's generators between evaluations (seeded once per cell), a private
``torch.Generator`` passed to a draw, draws inside a torch.library op's own implementation or a native
kernel (re-seeded, not made canonical), and nondeterministic kernels (atomics, cuDNN algorithm choice).
"""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

#: torch's primitive random draws (aten names), the functional, in-place and ``_like`` forms. Composite
#: ops that also compute (attention with dropout, RNNs) are left alone: redoing them in float64 would
#: change their arithmetic, not only their noise.
DRAWS = frozenset({
    "bernoulli", "bernoulli_", "cauchy", "cauchy_", "exponential", "exponential_", "geometric", "geometric_",
    "log_normal", "log_normal_", "multinomial", "native_dropout", "normal", "normal_", "poisson", "rand",
    "rand_like", "randint", "randint_like", "randn", "randn_like", "randperm", "random_", "uniform", "uniform_",
})


class CanonicalDraws(TorchDispatchMode):
    """While active, every global-generator draw in :data:`DRAWS` is made in float64, contiguous, on the
    CPU, then cast to the dtype, device and strides torch would have given: the same numbers whatever
    the dtype, layout or device of the call."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not _is_draw(func) or _private(args, kwargs):
            return func(*args, **kwargs)
        try:
            return _draw(func, args, kwargs)
        except (RuntimeError, NotImplementedError, TypeError, ValueError):
            # An op this scheme does not fit (no float64 or meta kernel): torch's own draw, still re-seeded,
            # rather than an error the audit caused.
            return func(*args, **kwargs)


class RecordedDraws(TorchDispatchMode):
    """While active, records each global-generator draw in :data:`DRAWS` as (op, shape), in order: two
    callables that record the same list consume the random stream alike (meta-device shells, which
    :class:`CanonicalDraws` computes once and caches, are not draws)."""

    def __init__(self):
        super().__init__()
        self.draws: list[tuple[str, tuple]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _is_draw(func) and not _private(args, kwargs):
            shapes = tuple(tuple(t.shape) for t in tree_flatten(out)[0] if isinstance(t, torch.Tensor)
                           and t.device.type != "meta")
            if shapes:
                self.draws.append((func._schema.name, shapes))
        return out


#: Whether each op seen is one of :data:`DRAWS` (every op of the target passes through the mode).
_IS_DRAW: dict = {}
#: The meta outputs of draws by op and argument metadata: random ops' meta kernels are Python refs
#: (about 1 ms a call), and finite differences call the same op on the same shapes many times.
_SHELLS: dict = {}


def _is_draw(func) -> bool:
    known = _IS_DRAW.get(func)
    if known is None:
        schema = getattr(func, "_schema", None)
        name = schema.name.split("::")[-1] if schema is not None else ""
        known = _IS_DRAW[func] = name in DRAWS and not func._overloadname.endswith("out")
    return known


def _private(args, kwargs) -> bool:
    """Whether the draw names its own generator: the audit leaves that stream alone."""
    return kwargs.get("generator") is not None or any(isinstance(a, torch.Generator) for a in args)


def _shell(func, args, kwargs):
    """What torch would return (shape, strides, dtype), on the meta device."""
    key = (func, _signature(args), _signature(kwargs))
    if key not in _SHELLS:
        if len(_SHELLS) > 4096:
            _SHELLS.clear()
        _SHELLS[key] = func(*tree_map(_meta, args), **_with(func, tree_map(_meta, kwargs), device="meta"))
    return _SHELLS[key]


def _signature(value) -> tuple:
    leaves, spec = tree_flatten(value)
    return str(spec), tuple((tuple(v.shape), v.stride(), v.dtype, v.device) if isinstance(v, torch.Tensor) else v
                            for v in leaves)


def _draw(func, args, kwargs):
    shell = _shell(func, args, kwargs)
    drawn = func(*tree_map(_canonical, args), **_with(func, kwargs, device="cpu", dtype=_wide(shell),
                                                      memory_format=torch.contiguous_format))
    if _writes_first(func):  # in place: fill the caller's tensor
        return args[0].copy_(drawn)
    device = _device(args, kwargs)
    if isinstance(shell, torch.Tensor):
        return _laid_out_like(shell, drawn, device)
    return type(shell)(_laid_out_like(s, d, device) for s, d in zip(shell, drawn))


def _writes_first(func) -> bool:
    alias = func._schema.arguments[0].alias_info if func._schema.arguments else None
    return alias is not None and alias.is_write


def _meta(value):
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
    return value


def _canonical(value):
    if isinstance(value, torch.Tensor):
        wide = torch.float64 if value.is_floating_point() else value.dtype
        return value.detach().to(device="cpu", dtype=wide).contiguous()
    return value


def _wide(shell) -> torch.dtype | None:
    first = shell if isinstance(shell, torch.Tensor) else shell[0]
    return torch.float64 if first.is_floating_point() else None


def _with(func, kwargs: dict, **overrides) -> dict:
    """``kwargs`` with the overrides the op's schema accepts (a ``None`` override leaves the key alone)."""
    accepted = {a.name for a in func._schema.arguments if a.kwarg_only}
    return {**kwargs, **{k: v for k, v in overrides.items() if k in accepted and v is not None}}


def _device(args, kwargs) -> torch.device:
    tensor = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if tensor is not None:
        return tensor.device
    return torch.device(kwargs.get("device") or "cpu")


def _laid_out_like(shell: torch.Tensor, drawn: torch.Tensor, device) -> torch.Tensor:
    out = torch.empty_strided(shell.shape, shell.stride(), dtype=shell.dtype, device=device)
    return out.copy_(drawn)

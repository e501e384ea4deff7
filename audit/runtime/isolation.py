"""Process-wide torch state a target may change and leave changed, captured and put back.

A worker (and a distributed rank) runs many entries one after another. A target that calls
``torch.set_default_dtype(torch.float16)``, ``torch.set_grad_enabled(False)`` or
``torch.use_deterministic_algorithms(True)`` and does not undo it would otherwise change the verdicts
of every cell that runs after it in the same process. :func:`isolated` puts the state back.
"""

from __future__ import annotations

import contextlib
import random
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from audit.runtime import health


def _device_context():
    """What ``torch.set_default_device`` last installed (None: never, or unset); compared by identity."""
    return getattr(getattr(torch, "_GLOBAL_DEVICE_CONTEXT", None), "device_context", None)


def _set_device_context(context) -> None:
    torch.set_default_device(getattr(context, "device", None))


def _flag(module, name: str):
    """A read and a write of a plain module attribute (the backend switches)."""
    return lambda: getattr(module, name), lambda value: setattr(module, name, value)


#: Each part of the state that changes results: its name, how to read it, how to set it back. A part is
#: set back only when it changed (``use_deterministic_algorithms`` imports Inductor: seconds).
PARTS = {
    "grad mode": (torch.is_grad_enabled, torch.set_grad_enabled),
    "default dtype": (torch.get_default_dtype, torch.set_default_dtype),
    "default device": (_device_context, _set_device_context),
    "deterministic algorithms": (
        lambda: (torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()),
        lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
    "anomaly mode": (lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
                     lambda value: torch.set_anomaly_enabled(*value)),
    "threads": (torch.get_num_threads, torch.set_num_threads),
    "float32 matmul precision": (torch.get_float32_matmul_precision, torch.set_float32_matmul_precision),
    "cudnn.deterministic": _flag(torch.backends.cudnn, "deterministic"),
    "cudnn.benchmark": _flag(torch.backends.cudnn, "benchmark"),
    "cudnn.allow_tf32": _flag(torch.backends.cudnn, "allow_tf32"),
    "cuda.matmul.allow_tf32": _flag(torch.backends.cuda.matmul, "allow_tf32"),
}


@dataclass(frozen=True, eq=False)
class GlobalState:
    """The global torch (and numpy, ``random``) state that changes results, as it was at one moment."""

    parts: dict
    rng: tuple

    @staticmethod
    def capture() -> GlobalState:
        """The state now."""
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        return GlobalState(parts={name: read() for name, (read, _) in PARTS.items()},
                           rng=(torch.get_rng_state(), np.random.get_state(), random.getstate(), cuda))

    def changed(self) -> list[str]:
        """The parts that differ from now (generators aside)."""
        return [name for name, (read, _) in PARTS.items() if _differs(read(), self.parts[name])]

    def restore(self) -> None:
        """Set every changed part back, and the generators."""
        for name in self.changed():
            PARTS[name][1](self.parts[name])
        torch.set_rng_state(self.rng[0])
        np.random.set_state(self.rng[1])
        random.setstate(self.rng[2])
        if self.rng[3] is not None:
            _restore_cuda_generators(self.rng[3])


def _restore_cuda_generators(states) -> None:
    """Put CUDA's generators back; on a lost CUDA context (a kernel's sticky fault) there is nothing to put back:
    the damage is noted, and the worker retires after this cell (:mod:`audit.runtime.health`)."""
    try:
        torch.cuda.set_rng_state_all(states)
    except RuntimeError as exc:
        reason = health.damage(exc)
        if not reason:
            raise
        health.note(reason)


def _differs(now, then) -> bool:
    return now is not then and now != then


@contextlib.contextmanager
def isolated(start: GlobalState | None = None):
    """Run the body with the state as it is now (or as ``start`` says) and put it back afterwards, whatever
    the body changed: grad mode, default dtype and device, deterministic algorithms, anomaly mode, threads,
    matmul precision and backend flags, the torch (CPU and CUDA), numpy and ``random`` generators, and
    warning filters."""
    before = GlobalState.capture()
    try:
        with warnings.catch_warnings():
            if start is not None:
                start.restore()
            yield
    finally:
        before.restore()

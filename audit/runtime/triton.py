"""Triton kernels where no GPU is: through Triton's interpreter.

An entry with ``triton: interpret`` has kernels written with ``@triton.jit``. Where a CUDA device is present they
run natively in its CUDA cells, and its CPU cells are a skip saying why (a Triton kernel does not run on CPU
tensors natively, and whether ``@triton.jit`` builds an interpreted kernel is fixed when the target's module is
imported). Where no CUDA device is present, the worker of a run with such an entry sets ``TRITON_INTERPRET=1``
at start-up, before anything imports triton (:func:`at_start`): ``@triton.jit`` then builds interpreted kernels,
which run on CPU tensors through numpy, and the entry's CPU cells audit them. Only runs with such an entry, and
only machines without CUDA, interpret anything. An exception raised inside the interpreter itself is a limitation of
the interpreter (a Python float argument used as ``arg.to(tl.float32)``, say), not a verdict on the kernel: such a
cell is a skip naming it.
"""

from __future__ import annotations

import os
import traceback

INTERPRET = "interpret"
#: Set in a worker's environment when the run has an entry with ``triton: interpret`` (:func:`at_start`).
WANTED = "AUDIT_TRITON"
#: Where Triton's interpreter lives, as a path fragment of its frames.
INTERPRETER_FRAMES = ("triton/runtime/interpreter", "triton\\runtime\\interpreter")


def at_start() -> None:
    """In a worker, right after torch is imported and before anything imports triton (Dynamo does): where the
    run has an entry with ``triton: interpret`` and no CUDA device is present, every ``@triton.jit`` of this
    process builds interpreted kernels. Triton's own library functions (``tl.sum``...) are built when triton is
    imported, so the flag must be set before that, not only before the target's import."""
    import torch

    if os.environ.get(WANTED) == INTERPRET and not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"


def prepare(entry) -> dict[str, str]:
    """Before ``entry``'s target is imported: choose how its Triton kernels run; returns the devices whose cells
    cannot run them, each with the reason (merged into the target's ``unbuilt``)."""
    if entry.triton != INTERPRET:
        return {}
    import torch

    if torch.cuda.is_available():
        return {"cpu": "its Triton kernels run on CUDA here (a Triton kernel takes no CPU tensor natively); the "
                       "audit runs them through Triton's interpreter on the CPU only where no CUDA device is present"}
    os.environ["TRITON_INTERPRET"] = "1"  # a process without a worker's start (the Python API): before the import
    return {}


def interpreted(entry) -> bool:
    """Whether ``entry``'s kernels run through Triton's interpreter in this process."""
    return entry.triton == INTERPRET and os.environ.get("TRITON_INTERPRET") == "1"


def limitation(exc: BaseException) -> str:
    """Why ``exc`` is a limitation of Triton's interpreter ("" when it is not): it was raised inside it."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return ""
    frames = traceback.extract_tb(exc.__traceback__)
    if not any(fragment in f.filename for f in frames for fragment in INTERPRETER_FRAMES):
        return ""
    said = str(exc).splitlines()[0] if str(exc) else ""
    return (f"Triton's interpreter cannot run this kernel ({type(exc).__name__}: {said}): "
            "a limitation of the interpreter, not a verdict on the kernel; audit it on a CUDA device")

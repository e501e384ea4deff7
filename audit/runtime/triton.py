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
import re
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
    """Why ``exc`` is a limitation of Triton's interpreter ("" when it is not): it was raised by the interpreter itself
    (its frame is the innermost outside the standard library), and it is not the caller's arguments failing to bind
    to the kernel's signature (a block size the package never passes where its autotuner is bypassed: the package's
    defect, reported at its own line). An exception from the package's code around the launch is the entry's."""
    if os.environ.get("TRITON_INTERPRET") != "1":
        return ""
    standard = os.path.dirname(os.__file__)
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if not (f.filename.startswith(standard) and "site-packages" not in f.filename)]
    if not frames or not any(fragment in frames[-1].filename for fragment in INTERPRETER_FRAMES):
        return ""
    if isinstance(exc, TypeError) and _BINDING.search(str(exc)):
        return ""
    said = str(exc).splitlines()[0] if str(exc) else ""
    return (f"Triton's interpreter cannot run this kernel ({type(exc).__name__}: {said}): "
            "a limitation of the interpreter, not a verdict on the kernel; audit it on a CUDA device")


#: How Python says arguments do not bind to a signature (inspect's bind, a call): the caller's mistake.
_BINDING = re.compile(r"missing (?:a|\d+) required (?:positional |keyword-only )?argument|unexpected keyword argument|"
                      r"too many positional arguments|takes \d+ positional arguments? but \d+ (?:were|was) given")


#: Values whose nearest bfloat16 is not the one truncation gives: 0.99998 rounds to 1.0 (truncated: 0.99609375).
_ROUNDING_PROBE = (0.99998, 1.0 + 3 / 512, 0.3, -0.99998)


def untrusted(entry, dtype: str) -> str:
    """Why ``entry``'s cells in ``dtype`` cannot be judged through Triton's interpreter ("" when they can): where
    the interpreter's conversion of float32 to ``dtype`` does not round to nearest as a GPU does, measured once on a
    probe kernel (Triton 3.x's interpreter truncates float32 to bfloat16: every bfloat16 store is off by up to one
    ulp toward zero, which a softmax backward at a probability near 1 turns into a gradient 300 times its error)."""
    if not interpreted(entry) or dtype not in ("bfloat16", "float16"):
        return ""
    if _converts_to_nearest(dtype):
        return ""
    return (f"Triton's interpreter does not round float32 to {dtype} to nearest as a GPU does (it truncates: "
            f"{_ROUNDING_PROBE[0]} becomes {_probe(dtype)[0]!r}), and it computes on two {dtype} operands as on "
            "their integer bit patterns (Triton's docs: the interpreter does not support bfloat16 operations), so a "
            f"{dtype} result through it says nothing about the kernel; audit the {dtype} cells on a CUDA device")


def _converts_to_nearest(dtype: str) -> bool:
    import torch

    values = torch.tensor(_ROUNDING_PROBE, dtype=torch.float32)
    return _probe(dtype) == values.to(getattr(torch, dtype)).tolist()


_PROBED: dict[str, list[float]] = {}


def _probe(dtype: str) -> list[float]:
    """What the interpreter stores for :data:`_ROUNDING_PROBE` converted to ``dtype`` inside a kernel (cached)."""
    if dtype not in _PROBED:
        import torch
        import triton
        import triton.language as tl

        @triton.jit
        def convert(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offs = tl.arange(0, BLOCK)
            mask = offs < n
            tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(out_ptr.dtype.element_ty), mask=mask)

        values = torch.tensor(_ROUNDING_PROBE, dtype=torch.float32)
        out = torch.empty(len(_ROUNDING_PROBE), dtype=getattr(torch, dtype))
        convert[(1,)](values, out, len(_ROUNDING_PROBE), BLOCK=8)
        _PROBED[dtype] = out.tolist()
    return _PROBED[dtype]

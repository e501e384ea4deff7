"""The fixed vocabulary of the user-facing contract (CONTRACT.md, version 1)."""

from __future__ import annotations

import enum

MATRIX_SCHEMA = "audit-matrix/1"

#: The low-precision real dtypes: the dtype check probes them beyond the claimed ones.
LOW_PRECISION_DTYPES = ("float16", "bfloat16")
#: The real floating dtypes, then the complex ones: the one list every dtype vocabulary derives from.
REAL_DTYPES = ("float64", "float32") + LOW_PRECISION_DTYPES
COMPLEX_DTYPES = ("complex128", "complex64")
DTYPE_ORDER = REAL_DTYPES + COMPLEX_DTYPES
#: The same dtypes in the order numerical checks prefer them: each complex dtype beside its real parts' dtype
#: (its parts are that precise), then the low-precision ones.
NUMERIC_PREFERENCE = ("float64", "complex128", "float32", "complex64", "bfloat16", "float16")
DEVICE_ORDER = ("cpu", "cuda", "mps")
#: Each complex dtype's real counterpart: the precision of its parts, whose tolerances and steps it takes.
REAL_PART = {"complex128": "float64", "complex64": "float32"}


#: Real dtypes from the most precise down: float16 and bfloat16 share a rank (neither holds the other's values).
PRECISION_RANK = {"float64": 3, "float32": 2, "bfloat16": 1, "float16": 1, "complex128": 3, "complex64": 2}


def wider_claimed(claimed, dtype: str) -> str | None:
    """The most precise of the ``claimed`` dtypes that is more precise than ``dtype`` (complex beside complex, real
    beside real), or None: where a check may run the target to have something wider to compare ``dtype`` with."""
    kind = dtype in COMPLEX_DTYPES
    wider = [d for d in claimed if (d in COMPLEX_DTYPES) == kind and PRECISION_RANK[d] > PRECISION_RANK[dtype]]
    return max(wider, key=PRECISION_RANK.__getitem__) if wider else None


def judged_by_own_error(claimed, dtype: str) -> bool:
    """Whether a cell in ``dtype`` compares with a reference by the error the reference itself makes in ``dtype``
    (a half-precision cell, or a float32 one where float64 is not claimed), not by a fixed tolerance."""
    return dtype in LOW_PRECISION_DTYPES or (dtype == "float32" and "float64" not in claimed)


def real_counterpart(dtype: str) -> str:
    """The real dtype of ``dtype``'s parts: itself for a real dtype, float64 for complex128, float32 for complex64."""
    return REAL_PART.get(dtype, dtype)


class Status(str, enum.Enum):
    """The status of one matrix cell."""

    PASS = "pass"
    FAIL = "fail"
    UNSUPPORTED = "unsupported"
    WAIVED = "waived"
    XPASS = "xpass"
    SKIP = "skip"
    ERROR = "error"

    def gates(self, strict: bool) -> bool:
        """Whether a cell with this status fails the gate."""
        if self in (Status.FAIL, Status.ERROR):
            return True
        return strict and self in (Status.SKIP, Status.XPASS)


class Exit(enum.IntEnum):
    """Exit codes of every command."""

    OK = 0
    GATE_FAILED = 1
    USAGE = 2
    INTERRUPTED = 130
    TERMINATED = 143  # SIGTERM (128 + 15), handled like an interrupt

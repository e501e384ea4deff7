"""The kinds of error the engine itself declares (the audit could not decide), and what to do about each.

A failure's kind is declared where it is found (``Violation.kind``, ``Finding.kind``, the engine's search); an
``error`` cell's kind is one of these, so that reports group errors by cause as they group failures.
"""

from __future__ import annotations

import enum


class ErrorKind(str, enum.Enum):
    """Why the audit could not decide a cell."""

    NOT_LOADED = "error: target could not be loaded"
    OUT_OF_MEMORY = "error: out of memory"
    AUDIT_FAILED = "error: the audit itself failed"
    WORKER_DIED = "error: worker died"
    TIMED_OUT = "error: timed out"
    NOT_RUN = "error: not run (worker lost too often)"
    DAMAGED = "error: process damaged"
    EXITED = "error: target called sys.exit"
    REGISTRY_FAULT = "error: registry fault"
    FORKED = "error: target forked"
    CUDA_FAULT = "error: asynchronous CUDA fault"

    def __str__(self) -> str:
        return self.value


#: What to do about each kind of error: the likely fix a report shows beside the group.
FIXES = {
    ErrorKind.NOT_LOADED: "make the entry's target importable (check target:, load: and the package's install)",
    ErrorKind.OUT_OF_MEMORY: "narrow the entry's dims or raise the worker's cap with --max-memory",
    ErrorKind.AUDIT_FAILED: "a bug in autograd-audit: report it with the cell's message",
    ErrorKind.WORKER_DIED: "the target crashed the process (a segfault or abort in native code): replay the cell",
    ErrorKind.TIMED_OUT: "narrow the entry's dims, or raise --timeout if the target is just slow",
    ErrorKind.NOT_RUN: "fix the error of the entry's other cells: its worker kept dying",
    ErrorKind.DAMAGED: "the target left the process unusable (recursion, threads, BaseException): replay the cell",
    ErrorKind.EXITED: "the target must raise an exception, not call sys.exit",
    ErrorKind.REGISTRY_FAULT: "fix the entry's proxy, vjp or reference in the registry (a kind model: its factory's "
                              "make_batch), not the target",
    ErrorKind.FORKED: "the target must not fork a process that returns into its caller",
    ErrorKind.CUDA_FAULT: "an illegal access or a device assert in the target's kernel: replay it with "
                          "CUDA_LAUNCH_BLOCKING=1",
}

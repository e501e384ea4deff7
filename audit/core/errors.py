"""One exception root for the audit, and the errors the command line maps to exit codes."""

from __future__ import annotations

from dataclasses import dataclass


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or "(no message)"."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


#: How torch's reentrant checkpointing and the reversible-layer libraries refuse torch.autograd.grad.
GRAD_REFUSALS = ("incompatible with .grad()", "not compatible with .grad()", "please use .backward()")


def refuses_grad(exc: BaseException | None) -> bool:
    """Whether ``exc``, or what it was raised from, is a backward refusing torch.autograd.grad for .backward()
    (the audit then takes that entry's gradients through .backward(): ``backward_only``)."""
    for _ in range(8):
        if exc is None:
            return False
        if any(text in str(exc) for text in GRAD_REFUSALS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


class AuditError(Exception):
    """Root of every error the audit raises on purpose; the CLI turns it into exit code 2."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a registry: where it is and what was expected there."""

    file: str
    line: int
    column: int
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: " if self.path else ""
        return f"{self.file}:{self.line}:{self.column}: {where}{self.message}"


class RegistryError(AuditError):
    """The registry cannot be used; carries every problem found, each with file:line:col."""

    def __init__(self, problems: list[Problem]):
        self.problems = sorted(problems, key=lambda p: (p.line, p.column, p.path, p.message))
        super().__init__("\n".join(str(p) for p in self.problems))


class UsageError(AuditError):
    """The command line asked for something that cannot be done (nothing selected, unknown entry)."""


class OutputError(AuditError):
    """A report or a file could not be written (a read-only folder, a full disk): names the path and cause."""


class InternalError(AuditError):
    """The audit itself went wrong; never the target's fault."""

"""A mutant, as a worker loads it: one function of the target's module with its code replaced, and put back.

The function object itself keeps its identity (``function.__code__`` is swapped), so that whatever holds it (a
Function class's ``staticmethod``, a ``register_autograd`` registration, a module-level alias) runs the mutant; no
file of the user's is written. See :mod:`audit.mutate` for how mutants are made.
"""

from __future__ import annotations

import importlib
import sys
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any


#: The equivalence probe's pseudo-check: the first cell of every mutant's job (never a check of the table; see
#: :mod:`audit.engine.equivalence`).
PROBE = "equivalence"


@dataclass(frozen=True)
class Mutant:
    """One change to one function: ``module`` and ``qualname`` (``Softmax.backward``, ``_backward``) name the
    function, ``source`` is the whole mutated ``def``; ``number`` and ``operator`` identify it in reports."""

    module: str
    qualname: str
    source: str
    number: int = 0
    operator: str = ""

    @property
    def label(self) -> str:
        """``m3 Softmax.backward``: how a worker's messages name it."""
        return f"m{self.number} {self.module}:{self.qualname}"


class MutantError(Exception):
    """The mutant cannot be loaded (its function is not found, is a closure, or its source does not compile)."""


def function_of(module: str, qualname: str):
    """The plain function ``module:qualname`` names (a staticmethod's or classmethod's function unwrapped)."""
    try:
        owner: Any = importlib.import_module(module)
    except Exception as exc:
        raise MutantError(f"module {module} could not be imported: {type(exc).__name__}: {exc}") from None
    *path, last = qualname.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            raise MutantError(f"{module}:{qualname}: {part} not found")
    found = owner.__dict__.get(last) if hasattr(owner, "__dict__") else None
    found = getattr(found, "__func__", found)
    if found is None or not hasattr(found, "__code__"):
        raise MutantError(f"{module}:{qualname} is not a Python function")
    return found


def mutated_code(mutant: Mutant, original):
    """The code object of ``mutant``'s source, compiled in its module's globals."""
    if original.__code__.co_freevars:
        raise MutantError(f"{mutant.module}:{mutant.qualname} is a closure (over "
                          f"{', '.join(original.__code__.co_freevars)}): its code cannot be replaced")
    namespace: dict[str, Any] = {}
    try:
        exec(compile(mutant.source, f"<mutant {mutant.label}>", "exec"), original.__globals__, namespace)
    except Exception as exc:
        raise MutantError(f"the mutant does not load: {type(exc).__name__}: {exc}") from None
    made = next(iter(namespace.values()))
    if made.__code__.co_freevars:
        raise MutantError(f"the mutant of {mutant.qualname} needs names of an enclosing scope")
    return made.__code__


@contextmanager
def applied(mutant: Mutant | None):
    """While inside, ``mutant``'s function runs the mutated code (nothing changes for None); put back after."""
    if mutant is None:
        yield None
        return
    function = function_of(mutant.module, mutant.qualname)
    original, code = function.__code__, mutated_code(mutant, function)
    function.__code__ = code
    try:
        yield Swap(function, original, code)
    finally:
        function.__code__ = original


@dataclass(frozen=True)
class Swap:
    """A function and its two codes, to run either, and to see whether the mutated one ran."""

    function: Any
    original: Any
    mutated: Any

    @contextmanager
    def running(self, mutated: bool):
        """Inside, the function runs the mutated code (or the original)."""
        self.function.__code__ = self.mutated if mutated else self.original
        try:
            yield
        finally:
            self.function.__code__ = self.mutated

    @contextmanager
    def watched(self, seen: list):
        """Inside, a call of the mutated code (on any thread) appends to ``seen``."""
        code = self.mutated

        def profile(frame, event, arg):
            if event == "call" and frame.f_code is code and not seen:
                seen.append(True)

        sys.setprofile(profile)
        threading.setprofile(profile)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)

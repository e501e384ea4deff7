"""Calling a target as the audit does (guarded), memoised values, what a call raised, and a script's verdict."""

from __future__ import annotations

import sys
import torch
from audit.kit.autograd import module_of


def guarded(f, mutates=(), seed=None):
    """``f`` called as the audit calls a target: each leaf tensor at a ``mutates`` position replaced by its clone
    (the audit's tensors are never written), and, with a ``seed``, torch's generator reset to it first. A module
    ``f`` stays reachable as ``.module`` (:func:`module_of`: its parameters are gradcheck's too)."""
    def call(*args):
        args = [a.clone() if i in mutates and isinstance(a, torch.Tensor) and a.is_leaf else a
                for i, a in enumerate(args)]
        if seed is not None:
            torch.manual_seed(seed)
        return f(*args)
    call.module = f if isinstance(f, torch.nn.Module) else module_of(f)
    return call


def once(compute):
    """A callable giving ``compute()``, computed on the first call only."""
    found = []

    def value():
        if not found:
            found.append(compute())
        return found[0]

    return value


def called(fn, ref, args) -> list:
    """The property of a check that has none to replay: the target called on the case, its result printed."""
    print(fn(*args))
    return []


def report(problems) -> int:
    """Print each problem, then "FAILS" or "holds"; the exit code a replay script ends with (1: it fails)."""
    for problem in problems:
        print(problem)
    print("FAILS" if problems else "holds")
    sys.stdout.flush()
    return 1 if problems else 0

"""Calling a target as the audit does (guarded), memoised values, what a call raised, and a script's verdict."""

from __future__ import annotations

import sys
import torch
from audit.kit.autograd import module_of


def reseed(seed: int) -> None:
    """Put torch's global CPU generator, and CUDA's once initialised, back to ``seed``: what a target draws next is
    the same at every call.

    Not ``torch.manual_seed``: on a build with CUDA support but CUDA not initialised, that queues a lazy seed and
    records the caller's stack each time (about 0.25 ms a call, against 2 µs; finite differences call the target
    thousands of times). An uninitialised CUDA needs no reseed here: the audit seeds it lazily once per cell, and a
    replay script's CUDA is initialised by its arguments before the first call."""
    torch.default_generator.manual_seed(seed)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(seed)


def guarded(f, mutates=(), seed=None):
    """``f`` called as the audit calls a target: each leaf tensor at a ``mutates`` position replaced by its clone
    (the audit's tensors are never written), and, with a ``seed``, torch's generator reset to it first
    (:func:`reseed`). A module ``f`` stays reachable as ``.module`` (:func:`module_of`: its parameters are
    gradcheck's too)."""
    def call(*args):
        args = [a.clone() if i in mutates and isinstance(a, torch.Tensor) and a.is_leaf else a
                for i, a in enumerate(args)]
        if seed is not None:
            reseed(seed)
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

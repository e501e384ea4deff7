"""``checkpoint``: under torch.utils.checkpoint (non-reentrant) outputs and gradients equal the unchecked run.

Checkpointing runs forward twice (once without saving, once again during backward), so forward must be
pure: the same inputs and RNG state give the same result. Checkpoint restores the global RNG state
itself; a private ``torch.Generator``, a call counter or a cache in forward is what breaks it.
"""

from __future__ import annotations

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import call_vjp, gradients
from audit.kit.compare import mismatch
from audit.kit.noise import measured_noise, noisy_mismatches
from audit.kit.tensors import fresh, outputs_of

#: Plain reruns that look for impurity once checkpoint disagrees: a private generator drawing one value
#: agrees with itself half the time, so one rerun alone would often blame checkpoint instead.
IMPURITY_RERUNS = 4


def checkpoint(fn, ref, args, *, seed, tol, reruns) -> list:
    """Two plain runs agree (forward is pure), then a run under checkpoint gives the plain outputs and gradients
    within ``tol`` plus the plain run's own rounding noise; where it does not, ``reruns`` more plain runs look for
    impurity, which is then the failure. Every call of ``fn``, the recomputation in backward included, starts from
    the cell's seed: only state that forward keeps for itself makes two runs differ."""
    plain = plain_run(fn, args, seed)
    found = impure(fn, args, seed, plain, tol, 1)
    if found:
        return found
    checked = checkpointed_run(fn, args, seed)
    measured = measured_noise(lambda xs: list(call_vjp(fn, xs, seed, keep="all")), fresh(args))
    found = (noisy_mismatches("output under checkpoint", checked[0], plain[0], tol, lambda: measured()[0])
             or noisy_mismatches("gradient under checkpoint (forward recomputed in backward) of input", checked[1],
                                 plain[1], tol, lambda: measured()[1]))
    return (impure(fn, args, seed, plain, tol, reruns) or found) if found else []


def plain_run(fn, args, seed: int):
    """Outputs and gradients of ``fn`` on fresh copies of ``args`` (:func:`audit.kit.autograd.call_vjp`)."""
    return call_vjp(fn, fresh(args), seed, keep="all")


def checkpointed_run(fn, args, seed: int):
    """:func:`plain_run` with ``fn`` under torch.utils.checkpoint (non-reentrant)."""
    from torch.utils.checkpoint import checkpoint as recomputed

    xs = fresh(args)
    outputs = list(recomputed(lambda *ys: tuple(outputs_of(fn(*ys))), *xs, use_reentrant=False))
    return [o.detach() for o in outputs], gradients(outputs, xs, seed)


def impure(fn, args, seed: int, plain, tol, reruns: int) -> list:
    """The impurity message when any of ``reruns`` plain runs differs from ``plain`` ([] when none does)."""
    for _ in range(reruns):
        again = plain_run(fn, args, seed)
        for got, expected in zip(again[0] + again[1], plain[0] + plain[1]):
            problem = mismatch(got, expected, tol)
            if problem:
                return [f"forward is not pure: two runs from the same inputs and RNG state differ ({problem}); "
                        "checkpoint recomputes forward during backward, so its gradients would use other values. "
                        "Keep state out of forward (counters, caches, a private torch.Generator), or claim "
                        "supports.checkpoint: false"]
    return []


CHECK = declared(
    "checkpoint",
    replay=checkpoint,
    replay_helpers=(plain_run, checkpointed_run, impure),
    script_values=lambda subject, case: {**tolerance_values(subject, case), "reruns": IMPURITY_RERUNS},
)

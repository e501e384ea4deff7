"""``checkpoint``: under torch.utils.checkpoint (non-reentrant) outputs and gradients equal the unchecked run.

Checkpointing runs forward twice (once without saving, once again during backward), so forward must be
pure: the same inputs and RNG state give the same result. Checkpoint restores the global RNG state
itself; a private ``torch.Generator``, a call counter or a cache in forward is what breaks it.
"""

from __future__ import annotations

from torch.utils.checkpoint import checkpoint

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit import noise
from audit.toolkit.tensors import gradients, mismatch, outputs_of

IMPURE = ("forward is not pure: two runs from the same inputs and RNG state differ ({problem}); checkpoint "
          "recomputes forward during backward, so its gradients would use other values. Keep state out of "
          "forward (counters, caches, a private torch.Generator), or claim supports.checkpoint: false")


def run(subject, case) -> None:
    """Two plain runs (purity), then one under checkpoint; all from the same global RNG state."""
    plain = _run(subject, case, checkpointed=False)
    tol = subject.tolerance()
    _pure(subject, case, plain, tol, reruns=1)
    checked = _run(subject, case, checkpointed=True)
    measured = noise.noise(lambda xs: list(_run_on(subject, xs, checkpointed=False)), subject.args(case))
    try:
        noise.compare_within_noise("output under checkpoint", checked[0], plain[0], tol, lambda: measured()[0])
        noise.compare_within_noise("gradient under checkpoint (forward recomputed in backward) of input", checked[1],
                                   plain[1], tol, lambda: measured()[1])
    except Violation:
        _pure(subject, case, plain, tol, reruns=IMPURITY_RERUNS)  # a recomputation that differs: impure forward?
        raise


#: Plain reruns that look for impurity once checkpoint disagrees: a private generator drawing one value
#: agrees with itself half the time, so one rerun alone would often blame checkpoint instead.
IMPURITY_RERUNS = 4


def _pure(subject, case, plain, tol, reruns: int) -> None:
    """Raise the impurity violation when any of ``reruns`` plain runs differs from ``plain``."""
    for _ in range(reruns):
        again = _run(subject, case, checkpointed=False)
        for got, expected in zip(again[0] + again[1], plain[0] + plain[1]):
            problem = mismatch(got, expected, tol)
            if problem:
                raise Violation(IMPURE.format(problem=problem))


def _run(subject, case, *, checkpointed: bool):
    """Each call of the target, the recomputation in backward included, starts from the cell's seed
    (:meth:`Subject.guard`): only state that forward keeps for itself makes two runs differ."""
    return _run_on(subject, subject.args(case), checkpointed=checkpointed)


def _run_on(subject, args, *, checkpointed: bool):
    fn = subject.evaluate
    if checkpointed:
        result = checkpoint(lambda *xs: tuple(outputs_of(fn(*xs))), *args, use_reentrant=False)
    else:
        result = outputs_of(fn(*args))
    outputs = list(result)
    return [o.detach() for o in outputs], gradients(outputs, args, subject.seed)


CHECK = declared(
    "checkpoint",
    run=run,
    script="""\
# The audit's property: a second plain run gives the same outputs and gradients (forward is pure), and so does
# a run under checkpoint (non-reentrant); every call of the target, the recomputation in backward included,
# starts from the cell's seed, and the gradients are those of the cell's cotangents.
from torch.utils.checkpoint import checkpoint

case = fresh(args)  # the case's values: each run gets its own leaves, as in the audit


def run(checkpointed, values=None):
    xs = fresh(case if values is None else values)
    if checkpointed:
        outs = list(checkpoint(lambda *xs: tuple(tensors_of(audited(*xs))), *xs, use_reentrant=False))
    else:
        outs = tensors_of(audited(*xs))
    return [o.detach() for o in outs], vjp(outs, xs)


def impure(plain, reruns):
    for _ in range(reruns):
        again = run(False)
        if differs("forward is not pure: a second plain run differs,", again[0] + again[1], plain[0] + plain[1]):
            return True
    return False


plain = run(False)
failed = impure(plain, 1)
if not failed:
    checked = run(True)
    noise = spread(lambda xs: list(run(False, xs)), case)  # the plain run's own rounding noise, as the audit has it
    failed = differs("output under checkpoint", checked[0], plain[0], atol + FACTOR * noise[0])
    failed |= differs("gradient under checkpoint (forward recomputed in backward) of input", checked[1], plain[1],
                      atol + FACTOR * noise[1])
    if failed:
        impure(plain, 4)  # a recomputation that differs: does forward keep state of its own?
print("fails" if failed else "holds: plain runs agree, and checkpoint gives the plain outputs and gradients")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)

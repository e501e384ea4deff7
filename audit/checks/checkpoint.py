"""``checkpoint``: under torch.utils.checkpoint (non-reentrant) outputs and gradients equal the unchecked run.

Checkpointing runs forward twice (once without saving, once again during backward), so forward must be
pure: the same inputs and RNG state give the same result. Checkpoint restores the global RNG state
itself; a private ``torch.Generator``, a call counter or a cache in forward is what breaks it.
"""

from __future__ import annotations

from torch.utils.checkpoint import checkpoint

from audit.checks.interface import Check, Violation
from audit.checks.tensors import compare_all, gradients, mismatch, outputs_of

IMPURE = ("forward is not pure: two runs from the same inputs and RNG state differ ({problem}); checkpoint "
          "recomputes forward during backward, so its gradients would use other values. Keep state out of "
          "forward (counters, caches, a private torch.Generator), or claim supports.checkpoint: false")


def run(subject, case) -> None:
    """Two plain runs (purity), then one under checkpoint; all from the same global RNG state."""
    plain = _run(subject, case, checkpointed=False)
    tol = subject.tolerance()
    _pure(subject, case, plain, tol, reruns=1)
    checked = _run(subject, case, checkpointed=True)
    try:
        compare_all("output under checkpoint", checked[0], plain[0], tol)
        compare_all("gradient under checkpoint (forward recomputed in backward) of input", checked[1], plain[1], tol)
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
    args = subject.args(case)
    fn = subject.evaluate
    if checkpointed:
        result = checkpoint(lambda *xs: tuple(outputs_of(fn(*xs))), *args, use_reentrant=False)
    else:
        result = outputs_of(fn(*args))
    outputs = list(result)
    return [o.detach() for o in outputs], gradients(outputs, args, subject.seed)


CHECK = Check(
    name="checkpoint",
    contract="under torch.utils.checkpoint.checkpoint(use_reentrant=False) outputs and gradients equal the "
             "unchecked run, and forward is pure (the same inputs and RNG state give the same values); "
             "claimed through supports.checkpoint (default true)",
    run=run,
    claimed=lambda entry: entry.supports.checkpoint,
    claim="supports.checkpoint",
    script="""\
from torch.utils.checkpoint import checkpoint
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
def grads(out):
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return torch.autograd.grad([o.sum() for o in outs if o.requires_grad], diff)
torch.manual_seed(0)
print("plain:     ", grads(fn(*args)))
torch.manual_seed(0)
print("checkpoint:", grads(checkpoint(fn, *args, use_reentrant=False)))
""",
)

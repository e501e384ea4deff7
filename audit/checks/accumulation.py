"""``accumulation`` (kind ``model``): gradients accumulated over micro-batches, each loss weighted by its
share of the batch, equal the gradients of the whole batch."""

from __future__ import annotations

from audit.checks.catalog import declared
from audit.checks import training
from audit.checks.interface import Violation
from audit.checks.tensors import mismatch
from audit.registry.model import Tolerance

#: Summation order differs between the two: float32 rounding, not the property, sets the floor.
TOLERANCE = {"float32": Tolerance(atol=1e-5, rtol=1e-4), "float64": Tolerance(atol=1e-9, rtol=1e-7)}


def run(subject, case) -> None:
    """The whole batch once, then its micro-batches accumulated; every parameter gradient compared."""
    plan = subject.entry.training
    model = training.build(subject)
    batch = model.batch(plan.batch, 0)
    model.step(*batch)
    whole = model.grads()
    model.module.zero_grad(set_to_none=True)
    for inputs, targets in training.chunks(batch, plan.micro_batches):
        share = len(targets) / plan.batch
        (model.loss(model.module(*inputs), targets) * share).backward()
    accumulated = model.grads()
    tol = subject.entry.tolerance_for(subject.dtype) or TOLERANCE.get(subject.dtype, TOLERANCE["float32"])
    for name, grad in whole.items():
        problem = mismatch(accumulated[name], grad, tol)
        if problem:
            raise Violation(f"gradient of {name!r} accumulated over {plan.micro_batches} micro-batches differs from "
                            f"the whole batch of {plan.batch}: {problem}; something keeps state across calls "
                            "(a cache, running statistics, a buffer) or the loss is not an average over samples")


CHECK = declared(
    "accumulation",
    run=run,
)

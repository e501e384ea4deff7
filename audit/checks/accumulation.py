"""``accumulation`` (kind ``model``): gradients accumulated over micro-batches, each loss weighted by its
share of the batch, equal the gradients of the whole batch."""

from __future__ import annotations

from audit.checks import training
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.registry.model import Tolerance
from audit.toolkit.tensors import mismatch

#: Summation order differs between the two: float32 rounding, not the property, sets the floor.
TOLERANCE = {"float32": Tolerance(atol=1e-5, rtol=1e-4), "float64": Tolerance(atol=1e-9, rtol=1e-7)}


def _tolerance(subject) -> Tolerance:
    """The entry's tolerance for the cell's dtype, else :data:`TOLERANCE`'s."""
    return subject.entry.tolerance_for(subject.dtype, TOLERANCE.get(subject.dtype, TOLERANCE["float32"]))


def _tolerance_values(subject) -> dict:
    """The comparison, for the replay script."""
    tol = _tolerance(subject)
    return {"atol": tol.atol, "rtol": tol.rtol, "scale": tol.scale}


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
    tol = _tolerance(subject)
    for name, grad in whole.items():
        problem = mismatch(accumulated[name], grad, tol)
        if problem:
            raise Violation(f"gradient of {name!r} accumulated over {plan.micro_batches} micro-batches differs from "
                            f"the whole batch of {plan.batch}: {problem}; something keeps state across calls "
                            "(a cache, running statistics, a buffer) or the loss is not an average over samples")


CHECK = declared(
    "accumulation",
    run=run,
    model_script="""\
model, make_batch, loss_fn = build()
inputs, targets = batch(make_batch, plan["batch"], 0)
step(model, loss_fn, inputs, targets)
whole = gradients(model)
model.zero_grad(set_to_none=True)
parts = plan["micro_batches"]
split = [x.chunk(parts) if torch.is_tensor(x) else [x] * parts for x in inputs]
split_targets = targets.chunk(parts) if torch.is_tensor(targets) else [targets] * parts
for k in range(parts):  # each micro-batch's loss weighted by its share of the batch
    (loss_fn(model(*[s[k] for s in split]), split_targets[k]) * (len(split_targets[k]) / plan["batch"])).backward()
failed = differ(f"gradient accumulated over {parts} micro-batches vs the whole batch", gradients(model), whole)
print("something keeps state across calls, or the loss is not an average" if failed
      else "accumulated gradients equal the whole batch's")
sys.exit(1 if failed else 0)
""",
    script_values=lambda subject, case: _tolerance_values(subject),
)

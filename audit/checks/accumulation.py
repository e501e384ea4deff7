"""``accumulation`` (kind ``model``): gradients accumulated over micro-batches, each loss weighted by its
share of the batch, equal the gradients of the whole batch."""

from __future__ import annotations

from audit.catalog.checks import declared
from audit.kit.compare import mismatch
from audit.kit.tolerance import Tolerance
from audit.kit.models import built_model, micro_batches, model_batch, parameter_grads, training_step

#: Summation order differs between the two: float32 rounding, not the property, sets the floor.
TOLERANCE = {"float32": Tolerance(atol=1e-5, rtol=1e-4), "float64": Tolerance(atol=1e-9, rtol=1e-7)}


def accumulation(fn, ref, args, *, dtype, device, tol, batch_size, parts) -> list:
    """``fn``, the model factory: the whole batch of ``batch_size`` (drawn from seed 0) once, then its
    ``parts`` micro-batches accumulated, each loss weighted by its share; every parameter's gradient
    within ``tol`` of the whole batch's."""
    built = built_model(fn, dtype, device)
    if isinstance(built, str):  # not (model, make_batch, loss): what is wrong
        return [built]
    model, make_batch, loss = built
    batch = model_batch(make_batch, batch_size, 0, dtype, device)
    training_step(model, loss, batch)
    whole = parameter_grads(model)
    model.zero_grad(set_to_none=True)
    for part in micro_batches(batch, parts):
        (loss(part.forward(model), part.targets) * (part.rows() / batch.rows())).backward()
    accumulated = parameter_grads(model)
    for name, grad in whole.items():
        problem = mismatch(accumulated[name], grad, tol)
        if problem:
            return [f"gradient of {name!r} accumulated over {parts} micro-batches differs from the whole "
                    f"batch of {batch_size}: {problem}; something keeps state across calls (a cache, running "
                    "statistics, a buffer) or the loss is not an average over samples"]
    return []


def _values(subject, case) -> dict:
    """The entry's tolerance for the cell's dtype (else :data:`TOLERANCE`'s) and its training plan's sizes."""
    tol = subject.entry.tolerance_for(subject.dtype, TOLERANCE.get(subject.dtype, TOLERANCE["float32"]))
    plan = subject.entry.training
    return {"tol": tol, "batch_size": plan.batch, "parts": plan.micro_batches}


CHECK = declared("accumulation", model_replay=accumulation, script_values=_values)

"""``train_step`` (kind ``model``): training steps with a fixed seed keep the loss and every gradient
finite, on every batch scanned, and the loss goes down on a repeated batch.

A non-finite value is traced to the forward operation (and custom Function) or the backward that
produced it, with the step, batch seed and size: a minimal reproduction, not a checkpoint. Records the
gradient norm per step, the mean step time and the worker's peak memory.
"""

from __future__ import annotations

import resource

import torch

from audit.catalog.checks import declared
from audit.checking.judgement import Stage
from audit.kit.models import built_model, model_batch, nonfinite, nonfinite_origin, parameter_grads, sgd, training_step


def train_step(fn, ref, args, *, dtype, device, plan, observe=None) -> list:
    """The model the factory ``fn`` builds from seed 0: ``plan["batches"]`` batches scanned for a non-finite loss or
    gradient (traced to its origin), then ``plan["steps"]`` SGD steps (lr ``plan["lr"]``) on the batch of seed 0,
    finite, and the loss lower at the end. ``observe(losses, norms, seconds)``, if given, is told each step's loss,
    gradient norm and time."""
    import time

    built = built_model(fn, dtype, device)
    if isinstance(built, str):
        return [built]
    model, make_batch, loss_fn = built
    size = plan["batch"]
    for batch_seed in range(plan["batches"]):
        batch = model_batch(make_batch, size, batch_seed, dtype, device)
        problem = nonfinite(training_step(model, loss_fn, batch), parameter_grads(model))
        if problem:
            return [f"batch seed {batch_seed} (size {size}, model seed 0): {problem}; origin: "
                    f"{nonfinite_origin(model, loss_fn, batch)}"]
    batch = model_batch(make_batch, size, 0, dtype, device)
    losses, norms, seconds = [], [], []
    for step in range(plan["steps"]):
        start = time.perf_counter()
        loss = training_step(model, loss_fn, batch)
        seconds.append(time.perf_counter() - start)
        grads = parameter_grads(model)
        problem = nonfinite(loss, grads)
        if problem:
            return [f"step {step} on the repeated batch (seed 0, size {size}): {problem}; origin: "
                    f"{nonfinite_origin(model, loss_fn, batch)}"]
        losses.append(loss.item())
        norms.append(float(torch.linalg.vector_norm(torch.cat([g.reshape(-1).double() for g in grads.values()]))))
        sgd(model, plan["lr"])
    if observe is not None:
        observe(losses, norms, seconds)
    if not losses[-1] < losses[0]:
        return [f"the loss did not go down over {plan['steps']} SGD steps (lr {plan['lr']}) on one repeated batch: "
                f"{losses}; gradients point the wrong way or do not reach the parameters"]
    return []


def recorded(subject, case):
    """An ``observe`` for :func:`train_step` that records the losses, gradient norms, mean step time and the
    worker's peak memory."""
    def observe(losses, norms, seconds):
        subject.metrics.update({"losses": [float(f"{x:.6g}") for x in losses],
                                "grad_norms": [float(f"{x:.6g}") for x in norms],
                                "step_seconds": round(sum(seconds) / len(seconds), 4),
                                "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})

    return observe


CHECK = declared(
    "train_step",
    stages=(Stage(observe=recorded),),
    model_replay=train_step,
)

"""``train_step`` (kind ``model``): training steps with a fixed seed keep the loss and every gradient
finite, on every batch scanned, and the loss goes down on a repeated batch.

A non-finite value is traced to the forward operation (and custom Function) or the backward that
produced it, with the step, batch seed and size: a minimal reproduction, not a checkpoint. Records the
gradient norm per step, the mean step time and the worker's peak memory.
"""

from __future__ import annotations

import resource
import time

import torch

from audit.checks.catalog import declared
from audit.checks import training
from audit.checks.interface import Violation


def run(subject, case) -> None:
    """Scan ``batches`` batches for non-finite values, then ``steps`` SGD steps on one repeated batch."""
    plan = subject.entry.training
    model = training.build(subject)
    for seed in range(plan.batches):
        inputs, targets = model.batch(plan.batch, seed)
        loss = model.step(inputs, targets)
        problem = training.nonfinite(loss, model.grads())
        if problem:
            raise Violation(f"batch seed {seed} (size {plan.batch}, model seed 0): {problem}; origin: "
                            f"{training.origin(model, inputs, targets)}")
    inputs, targets = model.batch(plan.batch, 0)
    losses, norms, seconds = [], [], []
    for step in range(plan.steps):
        start = time.perf_counter()
        loss = model.step(inputs, targets)
        seconds.append(time.perf_counter() - start)
        grads = model.grads()
        problem = training.nonfinite(loss, grads)
        if problem:
            raise Violation(f"step {step} on the repeated batch (seed 0, size {plan.batch}): {problem}; origin: "
                            f"{training.origin(model, inputs, targets)}")
        losses.append(loss.item())
        norms.append(float(torch.linalg.vector_norm(torch.cat([g.reshape(-1).double() for g in grads.values()]))))
        training.sgd(model, plan.lr)
    subject.metrics.update({"losses": [float(f"{x:.6g}") for x in losses],
                            "grad_norms": [float(f"{x:.6g}") for x in norms],
                            "step_seconds": round(sum(seconds) / len(seconds), 4),
                            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)})
    if not losses[-1] < losses[0]:
        raise Violation(f"the loss did not go down over {plan.steps} SGD steps (lr {plan.lr}) on one repeated "
                        f"batch: {losses}; gradients point the wrong way or do not reach the parameters")


CHECK = declared(
    "train_step",
    run=run,
)

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

from audit.checks import training
from audit.checks.catalog import declared
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
    model_script="""\
def nonfinite(model, loss, where):
    \"\"\"Print what is not finite (the loss, else the first parameter gradient) and where it first appears.\"\"\"
    bad = f"the loss is {loss.item()}" if not torch.isfinite(loss).all() else next(
        (f"the gradient of {n!r} is not finite" for n, g in gradients(model).items() if not torch.isfinite(g).all()), "")
    if bad:
        first = []  # the first submodule whose output is not finite, found by forward hooks on a re-run
        finite = lambda xs: all(torch.isfinite(x).all() for x in xs if torch.is_tensor(x) and x.is_floating_point())
        hooks = [m.register_forward_hook(lambda m, i, o, name=name: first.append((name or "the model", finite(i)))
                                         if not first and not finite(o if isinstance(o, tuple) else (o,)) else None)
                 for name, m in model.named_modules()]
        loss_fn(model(*inputs), targets)
        for hook in hooks:
            hook.remove()
        said = "none (the backward made it)" if not first else f"module {first[0][0]!r}" + (
            "" if first[0][1] else ", whose input was already not finite: the code that feeds it")
        print(f"{where}: {bad}; first non-finite output: {said}")
    return bool(bad)


model, make_batch, loss_fn = build()
for batch_seed in range(plan["batches"]):  # every scanned batch: a finite loss and finite gradients
    inputs, targets = batch(make_batch, plan["batch"], batch_seed)
    if nonfinite(model, step(model, loss_fn, inputs, targets), f"batch seed {batch_seed} (size {plan['batch']})"):
        sys.exit(1)
inputs, targets = batch(make_batch, plan["batch"], 0)
losses = []
for k in range(plan["steps"]):  # SGD on one repeated batch: the loss must go down
    loss = step(model, loss_fn, inputs, targets)
    if nonfinite(model, loss, f"step {k} on the repeated batch"):
        sys.exit(1)
    losses.append(loss.item())
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= plan["lr"] * p.grad
print("losses", losses)
if not losses[-1] < losses[0]:
    print(f"the loss did not go down over {plan['steps']} SGD steps (lr {plan['lr']})")
    sys.exit(1)
""",
)

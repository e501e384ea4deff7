"""What the model checks share: a built model at the cell's dtype and device, on the replay kit's (model,
make_batch, loss) protocol (:func:`audit.kit.built_model`), one training step, and the trace of a non-finite value
back to the operation (and custom Function) that produced it (:func:`audit.kit.nonfinite_origin`).

A ``kind: model`` target is a factory ``build()`` returning ``(model, make_batch, loss)``:
``make_batch(size, seed)`` returns ``(inputs, targets)`` with ``inputs`` a tuple of the model's
arguments, and ``loss(output, targets)`` returns a scalar averaged over the batch.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from audit import kit
from audit.checks.interface import Violation
from audit.kit import nonfinite

__all__ = ["Model", "build", "nonfinite", "origin", "sgd"]


@dataclass
class Model:
    """A built model with its batch maker and loss, at one dtype and device (the replay kit's functions, bound)."""

    module: torch.nn.Module
    make_batch: object
    loss: object
    dtype: torch.dtype
    device: str

    def batch(self, size: int, seed: int):
        """``make_batch(size, seed)`` moved to the model's dtype (floating tensors) and device."""
        return kit.model_batch(self.make_batch, size, seed, self.dtype, self.device)

    def step(self, inputs, targets):
        """Forward and backward from zero gradients; returns the loss."""
        return kit.training_step(self.module, self.loss, inputs, targets)

    def grads(self) -> dict[str, torch.Tensor]:
        """Every parameter's gradient (zeros where none arrived)."""
        return kit.parameter_grads(self.module)


def build(subject, seed: int = 0) -> Model:
    """The entry's model, built from ``seed``, at the cell's dtype and device."""
    dtype = getattr(torch, subject.dtype)
    built = kit.built_model(subject.target.fn, dtype, subject.device, seed)
    if isinstance(built, str):
        raise Violation(built)
    module, make_batch, loss = built
    return Model(module, make_batch, loss, dtype, subject.device)


def sgd(model: Model, lr: float) -> None:
    """One plain SGD update."""
    kit.sgd(model.module, lr)


def origin(model: Model, inputs, targets) -> str:
    """Re-run one step to find where the first non-finite value came from (:func:`audit.kit.nonfinite_origin`)."""
    return kit.nonfinite_origin(model.module, model.loss, inputs, targets)

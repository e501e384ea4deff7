"""What the model checks share: the (model, make_batch, loss) protocol, one training step, and the
trace of a non-finite value back to the operation (and custom Function) that produced it.

A ``kind: model`` target is a factory ``build()`` returning ``(model, make_batch, loss)``:
``make_batch(size, seed)`` returns ``(inputs, targets)`` with ``inputs`` a tuple of the model's
arguments, and ``loss(output, targets)`` returns a scalar averaged over the batch.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from audit.checks.interface import Violation
from audit.errors import first_line
from audit.frames import is_user
from audit.kit import NotAModel, built_model, model_batch, model_step, parameter_gradients


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
        return model_batch(self.make_batch, size, seed, self.dtype, self.device)

    def step(self, inputs, targets):
        """Forward and backward from zero gradients; returns the loss."""
        return model_step(self.module, self.loss, inputs, targets)

    def grads(self) -> dict[str, torch.Tensor]:
        """Every parameter's gradient (zeros where none arrived)."""
        return parameter_gradients(self.module)


def build(subject, seed: int = 0) -> Model:
    """The entry's model, built from ``seed``, at the cell's dtype and device (:func:`audit.kit.built_model`)."""
    dtype = getattr(torch, subject.dtype)
    try:
        module, make_batch, loss = built_model(subject.target.fn, dtype, subject.device, seed)
    except NotAModel as exc:
        raise Violation(str(exc)) from None
    return Model(module, make_batch, loss, dtype, subject.device)


def sgd(model: Model, lr: float) -> None:
    """One plain SGD update."""
    with torch.no_grad():
        for p in model.module.parameters():
            if p.grad is not None:
                p -= lr * p.grad


def nonfinite(loss, grads: dict) -> str | None:
    """What is not finite: the loss, or the first parameter gradient that is not."""
    if not torch.isfinite(loss).all():
        return f"the loss is {loss.item()}"
    for name, grad in grads.items():
        if not torch.isfinite(grad).all():
            return f"the gradient of {name!r} is not finite"
    return None


def origin(model: Model, inputs, targets) -> str:
    """Re-run one step to find where the first non-finite value came from: a dispatch mode watches every
    forward operation; if forward is clean, anomaly mode names the backward that produced it."""
    finder = _FirstNonFinite()
    with finder:
        model.module.zero_grad(set_to_none=True)
        loss = model.loss(model.module(*inputs), targets)
    if finder.found:
        return finder.found
    with warnings.catch_warnings(record=True) as caught, torch.autograd.detect_anomaly(check_nan=True):
        warnings.simplefilter("always")
        try:
            loss.backward()
        except RuntimeError as exc:
            forward = next((str(w.message) for w in caught if "Traceback of forward call" in str(w.message)), "")
            where = _user_line(forward)
            return f"backward: {first_line(exc)}" + (f"; its forward was called at {where}" if where else "")
    return "not found again when re-run (the step is not deterministic)"


class _FirstNonFinite(TorchDispatchMode):
    """Records the first operation whose output holds a NaN or an infinity, and the user code around it."""

    def __init__(self):
        super().__init__()
        self.found = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.found:
            tensors = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)] \
                if isinstance(out, (tuple, list)) else []
            if any(t.is_floating_point() and t.numel() and not torch.isfinite(t).all() for t in tensors):
                self.found = f"forward: {func} produced the first non-finite value{_where()}"
        return out


def _where() -> str:
    frames = [f for f in inspect.stack()[2:] if is_user(f.filename)]
    if not frames:
        return ""
    frame = frames[0]
    text = f" at {frame.filename}:{frame.lineno} in {frame.function}"
    function = _custom_function(frame.frame)
    return text + (f", inside autograd.Function {function}" if function else "")


def _custom_function(frame) -> str | None:
    """The custom autograd.Function whose forward ``frame`` is running, if it is one."""
    qualname = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    owner = qualname.rsplit(".", 1)[0] if "." in qualname else None
    cls = frame.f_globals.get(owner.split(".")[0]) if owner else None
    for part in owner.split(".")[1:] if owner and cls is not None else ():
        cls = getattr(cls, part, None)
    return owner if inspect.isclass(cls) and issubclass(cls, torch.autograd.Function) else None


def _user_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("File ")]
    own = [ln for ln in lines if is_user(ln.replace('File "', ""))]
    return own[-1].replace('File "', "").replace('", line ', ":") if own else ""

"""Modules and models: built from a seed, given a batch, trained a step; micro-batches; where a value first
turned non-finite."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from audit.kit.explain import first_line, library_folders, user_site


#: What a kind model's ``make_batch(size, seed)`` may return, in the words of every message that refuses another form.
BATCH_FORMS = ("(inputs, targets), inputs a tensor (the model's one argument), a tuple or list (its positional "
               "arguments) or a dict of str to values (its keyword arguments)")


class BatchError(TypeError):
    """``make_batch`` returned another form than :data:`BATCH_FORMS`: the entry's harness, not the code it trains."""


@dataclass(frozen=True)
class Batch:
    """One batch as a kind model's model and loss take it: ``model(*args, **kwargs)``, then ``loss(output,
    targets)``."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    targets: Any = None

    def forward(self, model):
        """``model(*args, **kwargs)``."""
        return model(*self.args, **self.kwargs)

    def rows(self) -> int:
        """Its size along dim 0: that of its first tensor of at least one dimension (among the positional arguments,
        the keyword arguments' values, the targets); 0 with none."""
        tensors = [x for x in (*self.args, *self.kwargs.values(), self.targets)
                   if isinstance(x, torch.Tensor) and x.dim()]
        return len(tensors[0]) if tensors else 0


def as_batch(made) -> Batch:
    """What ``make_batch(size, seed)`` returned, ``(inputs, targets)``, as a :class:`Batch`: ``inputs`` a tensor is
    the model's one argument, a tuple or list its positional arguments, a dict its keyword arguments (the Lightning
    and Hugging Face data-collator convention). A :class:`BatchError` saying what was expected and what came back for
    any other form."""
    if not (isinstance(made, (tuple, list)) and len(made) == 2):
        raise BatchError(f"make_batch(size, seed) must return {BATCH_FORMS}; got {_described(made)}")
    inputs, targets = made
    if isinstance(inputs, torch.Tensor):
        return Batch((inputs,), {}, targets)
    if isinstance(inputs, (tuple, list)):
        return Batch(tuple(inputs), {}, targets)
    if isinstance(inputs, dict) and all(isinstance(k, str) for k in inputs):
        return Batch((), dict(inputs), targets)
    raise BatchError(f"make_batch(size, seed) must return {BATCH_FORMS}; got ({_described(inputs)}, "
                     f"{_described(targets)})")


def _described(value) -> str:
    """A value's form in a few words: its type, a tensor's shape, a sequence's length, a dict's keys."""
    if isinstance(value, torch.Tensor):
        return f"a tensor of shape {tuple(value.shape)}"
    if isinstance(value, (tuple, list)):
        return f"a {type(value).__name__} of {len(value)}"
    if isinstance(value, dict):
        return f"a dict with keys {', '.join(sorted(map(repr, value)))}" if value else "an empty dict"
    return type(value).__name__


def micro_batches(batch: Batch, parts: int) -> list[Batch]:
    """``batch`` split into ``parts`` micro-batches along dim 0: every tensor among its positional arguments, its
    keyword arguments' values and its targets (anything else, a 0-dim tensor too, repeated)."""
    args = [_split(x, parts) for x in batch.args]
    kwargs = {name: _split(x, parts) for name, x in batch.kwargs.items()}
    targets = _split(batch.targets, parts)
    return [Batch(tuple(a[i] for a in args), {name: k[i] for name, k in kwargs.items()}, targets[i])
            for i in range(parts)]


def _split(value, parts: int) -> list:
    """A tensor's ``parts`` chunks along dim 0; anything else (a 0-dim tensor too) ``parts`` times."""
    return list(value.chunk(parts)) if isinstance(value, torch.Tensor) and value.dim() else [value] * parts


def seeded(factory, seed: int):
    """``factory()`` called with torch's generator seeded to ``seed``, the generator's state put back after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory()


def built_module(make, seed: int, dtype, device):
    """The module ``make()`` builds from ``seed``, at ``dtype`` on ``device``."""
    return seeded(make, seed).to(dtype=dtype, device=torch.device(device))


def built_model(factory, dtype, device, seed: int = 0):
    """``(model, make_batch, loss)`` from a kind model's factory called from ``seed``, the model at ``dtype`` on
    ``device``; what is wrong (a str) when the factory returns something else. ``make_batch(size, seed)`` returns
    ``(inputs, targets)`` (:func:`as_batch` says in which forms); ``loss(output, targets)`` a scalar."""
    built = seeded(factory, seed)
    if not (isinstance(built, tuple) and len(built) == 3 and isinstance(built[0], torch.nn.Module)):
        return ("the factory must return (model, make_batch, loss) with model an nn.Module; got "
                f"{type(built).__name__}")
    return built[0].to(dtype=dtype, device=torch.device(device)), built[1], built[2]


def model_batch(make_batch, size: int, seed: int, dtype, device) -> Batch:
    """``make_batch(size, seed)`` as a :class:`Batch` (:func:`as_batch`), its floating tensors at ``dtype`` and every
    tensor on ``device``; what ``make_batch`` itself raises is a :class:`BatchError` naming it."""
    try:
        made = make_batch(size, seed)
    except Exception as exc:
        raise BatchError(f"make_batch({size}, {seed}) raised {type(exc).__name__}: {first_line(exc)}"
                         f"{user_site(exc)}") from exc
    batch = as_batch(made)
    return Batch(tuple(_placed(x, dtype, device) for x in batch.args),
                 {name: _placed(x, dtype, device) for name, x in batch.kwargs.items()},
                 _placed(batch.targets, dtype, device))


def _placed(value, dtype, device):
    if isinstance(value, torch.Tensor):
        value = value.to(device=device)
        return value.to(dtype) if value.is_floating_point() else value
    return value


def training_step(model, loss_fn, batch: Batch):
    """Forward and backward on ``batch`` from zero gradients; the loss (a :class:`BatchError` when ``loss_fn`` returns
    anything but a scalar tensor)."""
    model.zero_grad(set_to_none=True)
    loss = loss_fn(batch.forward(model), batch.targets)
    if not (isinstance(loss, torch.Tensor) and loss.numel() == 1):
        got = f"a tensor of shape {list(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss).__name__
        raise BatchError(f"loss(output, targets) must return a scalar tensor (a mean or sum over the batch, which "
                         f"backward starts from); got {got}")
    loss.backward()
    return loss


def parameter_grads(model) -> dict:
    """Every parameter's gradient by name (zeros where none arrived)."""
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
            for n, p in model.named_parameters() if p.requires_grad}


def sgd(model, lr: float) -> None:
    """One plain SGD update of ``model``'s parameters."""
    with torch.no_grad():
        for p in model.parameters():
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


def nonfinite_origin(model, loss_fn, batch: Batch) -> str:
    """Where one step's first non-finite value comes from, the step re-run: a dispatch mode watches every forward
    operation; if forward is clean, anomaly mode names the backward that produced it."""
    import warnings

    finder = FirstNonFinite()
    with finder:
        model.zero_grad(set_to_none=True)
        loss = loss_fn(batch.forward(model), batch.targets)
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


class FirstNonFinite(TorchDispatchMode):
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
    import inspect

    library = library_folders()
    frames = [f for f in inspect.stack()[2:] if not f.filename.startswith(library)]
    if not frames:
        return ""
    frame = frames[0]
    text = f" at {frame.filename}:{frame.lineno} in {frame.function}"
    function = _custom_function(frame.frame)
    return text + (f", inside autograd.Function {function}" if function else "")


def _custom_function(frame) -> str | None:
    """The custom autograd.Function whose forward ``frame`` is running, if it is one."""
    import inspect

    qualname = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    owner = qualname.rsplit(".", 1)[0] if "." in qualname else None
    cls = frame.f_globals.get(owner.split(".")[0]) if owner else None
    for part in owner.split(".")[1:] if owner and cls is not None else ():
        cls = getattr(cls, part, None)
    return owner if inspect.isclass(cls) and issubclass(cls, torch.autograd.Function) else None


def _user_line(text: str) -> str:
    library = library_folders()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("File ")]
    own = [ln for ln in lines if not ln.replace('File "', "").startswith(library)]
    return own[-1].replace('File "', "").replace('", line ', ":") if own else ""

"""Modules and models: built from a seed, given a batch, trained a step; micro-batches; where a value first
turned non-finite."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from audit.kit.explain import first_line, library_folders


def micro_batches(batch, parts: int) -> list:
    """``(inputs, targets)`` split into ``parts`` micro-batches along dim 0 (anything not a tensor repeated)."""
    inputs, targets = batch
    split_inputs = [x.chunk(parts) if isinstance(x, torch.Tensor) else [x] * parts for x in inputs]
    split_targets = targets.chunk(parts) if isinstance(targets, torch.Tensor) else [targets] * parts
    return [(tuple(s[i] for s in split_inputs), split_targets[i]) for i in range(parts)]


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
    ``(inputs, targets)``, ``inputs`` a tuple of the model's arguments; ``loss(output, targets)`` a scalar."""
    built = seeded(factory, seed)
    if not (isinstance(built, tuple) and len(built) == 3 and isinstance(built[0], torch.nn.Module)):
        return ("the factory must return (model, make_batch, loss) with model an nn.Module; got "
                f"{type(built).__name__}")
    return built[0].to(dtype=dtype, device=torch.device(device)), built[1], built[2]


def model_batch(make_batch, size: int, seed: int, dtype, device):
    """``make_batch(size, seed)`` with its floating tensors at ``dtype`` and every tensor on ``device``."""
    inputs, targets = make_batch(size, seed)
    return tuple(_placed(x, dtype, device) for x in inputs), _placed(targets, dtype, device)


def _placed(value, dtype, device):
    if isinstance(value, torch.Tensor):
        value = value.to(device=device)
        return value.to(dtype) if value.is_floating_point() else value
    return value


def training_step(model, loss_fn, inputs, targets):
    """Forward and backward from zero gradients; the loss."""
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(*inputs), targets)
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


def nonfinite_origin(model, loss_fn, inputs, targets) -> str:
    """Where one step's first non-finite value comes from, the step re-run: a dispatch mode watches every forward
    operation; if forward is clean, anomaly mode names the backward that produced it."""
    import warnings

    finder = FirstNonFinite()
    with finder:
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(*inputs), targets)
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

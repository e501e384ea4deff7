"""``audit scan MODEL``: forward and backward in eager mode under instrumentation, on one batch or several.

Every ``autograd.Function.apply`` is recorded (no-grad uses included), the autograd graph is walked for
Function nodes, and a dispatch mode sees every operator call outside torch's own namespaces; each with
its arguments' shapes, dtypes, strides and devices and the user line that called it.
"""

from __future__ import annotations

import contextlib
import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from audit.core.frames import is_user
from audit.kit.models import Batch
from audit.scan.findings import Call, Finding

#: Operator namespaces that belong to torch itself.
BUILTIN_NAMESPACES = {"aten", "prims", "prim", "_c10d_functional", "c10d", "c10d_functional", "profiler", "quantized",
                      "_quantized", "debugprims", "rngprims", "higher_order", "inductor", "_inductor_test", "_test"}


class Recorder:
    """Collects findings by target."""

    def __init__(self):
        self.found: dict[str, Finding] = {}

    def record(self, kind: str, target: str, args, source: str = "") -> None:
        finding = self.found.setdefault(target, Finding(kind=kind, target=target, source=source))
        finding.calls.append(Call(tuple(_describe(a) for a in args)))
        if not finding.sample:
            finding.sample = tuple(a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args)
        site = _site()
        if site and site not in finding.sites:
            finding.sites.append(site)
        finding.grad = finding.grad or torch.is_grad_enabled()


def scan_model(model, inputs) -> list[Finding]:
    """Run ``model(*inputs)``, a backward through every floating output, and return what was found."""
    return scan_batches(model, [Batch(tuple(inputs))])


def scan_batches(model, batches: list[Batch], loss=None) -> list[Finding]:
    """For each :class:`~audit.kit.models.Batch` of ``batches``: ``model(*args, **kwargs)``, then a backward through
    ``loss(output, targets)`` (a kind model's triple), or without a loss through every floating output; what was found
    over all of them (every call's shapes and values: a stub's domain and dims span the batches)."""
    recorder = Recorder()
    for batch in batches:
        with _functions_recorded(recorder), _OpRecorder(recorder):
            outputs = batch.forward(model)
            if loss is not None:
                outputs = loss(outputs, batch.targets)
        tensors = [outputs] if isinstance(outputs, torch.Tensor) else [o for o in _flatten(outputs)
                                                                        if isinstance(o, torch.Tensor)]
        roots = [t for t in tensors if t.requires_grad]
        for cls in _graph_functions(roots):
            recorder.found.setdefault(function_target(cls), Finding("function", function_target(cls), _source(cls),
                                                                    grad=True))
        if roots:
            with _OpRecorder(recorder):
                torch.autograd.backward(roots, [torch.ones_like(t) for t in roots])
    return list(recorder.found.values())


def function_target(cls) -> str:
    """``module:Qualname`` of a Function class."""
    return f"{cls.__module__}:{cls.__qualname__}"


@contextlib.contextmanager
def _functions_recorded(recorder: Recorder):
    original = torch.autograd.Function.__dict__["apply"]

    def apply(cls, *args, **kwargs):
        if not cls.__module__.startswith("torch."):  # torch's own Functions (those behind custom ops) are not user code
            recorder.record("function", function_target(cls), args, _source(cls))
        return original.__func__(cls, *args, **kwargs)

    torch.autograd.Function.apply = classmethod(apply)
    try:
        yield
    finally:
        torch.autograd.Function.apply = original


class _OpRecorder(TorchDispatchMode):
    def __init__(self, recorder: Recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        namespace = getattr(func, "namespace", "aten")
        if namespace not in BUILTIN_NAMESPACES:
            self.recorder.record("op", f"{namespace}::{func._schema.name.split('::')[-1]}", args)
        return func(*args, **(kwargs or {}))


def _graph_functions(roots) -> list:
    """Custom Function classes among the autograd graph's nodes."""
    seen, found, stack = set(), [], [t.grad_fn for t in roots if t.grad_fn is not None]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        cls = getattr(node, "_forward_cls", None)
        if cls is not None and not cls.__module__.startswith("torch.") and cls not in found:
            found.append(cls)
        stack.extend(n for n, _ in node.next_functions)
    return found


def _describe(arg):
    if isinstance(arg, torch.Tensor):
        finite = arg.detach()
        if finite.numel() and (finite.is_floating_point() or finite.dtype in (torch.int64, torch.int32)):
            values = finite.double()
            lo, hi = float(values.min()), float(values.max())
        else:
            lo = hi = 0.0
        return ("tensor", tuple(arg.shape), str(arg.dtype).replace("torch.", ""), tuple(arg.stride()),
                arg.device.type, bool(arg.requires_grad), lo, hi)
    plain = arg if isinstance(arg, (bool, int, float, str, type(None))) else None
    return ("value", repr(arg), plain)


def _site() -> str:
    frames = [f for f in traceback.extract_stack()[:-3] if is_user(f.filename)]
    return f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""


def _source(cls) -> str:
    import inspect

    try:
        return inspect.getsourcefile(cls) or ""
    except TypeError:
        return ""


def _flatten(value):
    if isinstance(value, (tuple, list)):
        for item in value:
            yield from _flatten(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _flatten(item)
    else:
        yield value

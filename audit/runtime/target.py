"""Import what an entry names (its ``load`` list, target and reference) and fingerprint it."""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any

from audit.core.errors import AuditError
from audit.registry.model import LAYER_KINDS, Entry, EntryKind
from audit.runtime import definition, native, triton


class TargetError(AuditError):
    """The target could not be imported or is not what its kind says."""


@dataclass(frozen=True)
class Target:
    """The callable under audit, its trusted reference, its proxy (whose gradient is the intended one) or its
    declared VJP (which gives the intended gradients) if any, and the digest of its code."""

    fn: Callable
    reference: Callable | None
    digest: str
    obj: object
    unbuilt: dict = field(default_factory=dict)
    proxy: Callable | None = None
    vjp: Callable | None = None


def resolve(entry: Entry, base: Path) -> Target:
    """Load the entry's modules and return its :class:`Target`; raises :class:`TargetError`."""
    if str(base) not in sys.path:
        sys.path.insert(0, str(base))
    try:
        loaded = native.load(entry.load, base)
    except native.NativeError as exc:
        raise TargetError(str(exc)) from None
    unbuilt = {**loaded.unbuilt, **triton.prepare(entry)}  # before any import: how @triton.jit builds kernels
    for item in entry.load:
        if not native.is_native(item):
            _load(item)
    obj = _op(entry.target) if entry.kind == EntryKind.OP else import_object(entry.target)
    fn = _callable(entry, obj)
    _built(entry, fn)
    reference = _companion(entry, "reference", entry.reference)
    proxy = _companion(entry, "proxy", entry.proxy)
    declared_vjp = _companion(entry, "vjp", entry.vjp)
    if entry.kind in (EntryKind.FUNCTION, EntryKind.CALLABLE):
        _binds(entry, "target", entry.target, obj.forward if entry.kind == EntryKind.FUNCTION else obj)
    if entry.backward_only:
        fn = through_backward(fn)
    return Target(fn=fn, reference=reference, digest=_digest(entry, obj, loaded.files), obj=obj, unbuilt=unbuilt,
                  proxy=proxy, vjp=declared_vjp)


def _companion(entry: Entry, key: str, spec: str | None) -> Callable | None:
    """The entry's ``reference``, ``proxy`` or declared ``vjp``, imported and callable, a reference or a proxy taking
    the registry's inputs (a VJP takes the cotangents too: its count is the outputs'); None: none declared."""
    if spec is None:
        return None
    found = import_object(spec)
    if not callable(found):
        raise TargetError(f"{key}: {spec} is not callable (got {type(found).__name__}): name a function of the "
                          "entry's inputs")
    if key != "vjp":
        _binds(entry, key, spec, found)
    return found


def _binds(entry: Entry, key: str, spec: str, fn: Callable) -> None:
    """Whether ``fn`` takes the registry's inputs (one positional argument each); a :class:`TargetError` saying what
    it takes when not. A function whose signature cannot be read (a builtin) is taken on trust."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    parameters = list(signature.parameters.values())
    if key == "target" and entry.kind == EntryKind.FUNCTION and parameters and parameters[0].name == "ctx":
        parameters = parameters[1:]  # forward(ctx, ...): apply passes the context itself
    try:
        signature.replace(parameters=parameters).bind(*range(len(entry.inputs)))
    except TypeError as exc:
        count = len(entry.inputs)
        raise TargetError(f"{key}: {spec}{signature.replace(parameters=parameters)} does not take the registry's "
                          f"{count} input{'s' * (count != 1)} (inputs:, one positional argument each): {exc}") from None


def _built(entry: Entry, fn: Callable) -> None:
    """A module or model entry's factory called once from the audit's seed, here where an error says what it is: a
    factory that raises, takes arguments or returns something else is a :class:`TargetError` naming it."""
    if entry.kind not in LAYER_KINDS:
        return
    import torch

    from audit.kit.explain import first_line, user_site
    from audit.kit.models import seeded

    expected = ("an nn.Module" if entry.kind == EntryKind.MODULE else
                "(model, make_batch, loss) with model an nn.Module")
    factory = fn.factory if isinstance(fn, ModuleCall) else fn
    try:
        built = seeded(factory, ModuleCall.SEED)
    except Exception as exc:
        raise TargetError(f"the {entry.kind} factory {entry.target} raised {type(exc).__name__}: {first_line(exc)}"
                          f"{user_site(exc)} (kind {entry.kind}: a function called with no arguments that returns "
                          f"{expected})") from None
    fits = isinstance(built, torch.nn.Module) if entry.kind == EntryKind.MODULE else (
        isinstance(built, tuple) and len(built) == 3 and isinstance(built[0], torch.nn.Module))
    if not fits:
        got = type(built).__name__ if not isinstance(built, tuple) else \
            f"a tuple of {len(built)} ({', '.join(type(b).__name__ for b in built)})"
        raise TargetError(f"the {entry.kind} factory {entry.target} returned {got}: expected {expected}")
    if isinstance(fn, ModuleCall):
        fn.instances["base"] = built


def through_backward(fn: Callable) -> Callable:
    """``fn`` with every gradient of it taken through torch.autograd.backward: the replay kit's
    :func:`audit.kit.autograd.backward_only`, as a replay script wraps its target too."""
    from audit.kit.autograd import backward_only

    return backward_only(fn)


def import_object(spec: str):
    """``"module:Qual.name"`` to the object it names."""
    module_name, _, qualname = spec.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:  # the module's own import may raise anything
        raise TargetError(f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in qualname.split("."):
        if not hasattr(obj, part):
            raise TargetError(f"module {module_name!r} has no attribute {qualname!r}")
        obj = getattr(obj, part)
    return obj


def _load(item: str) -> None:
    try:
        importlib.import_module(item)
    except Exception as exc:
        raise TargetError(f"load: cannot import {item!r}: {type(exc).__name__}: {exc}") from exc


def _op(target: str):
    import torch

    namespace, _, rest = target.partition("::")
    name, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, namespace), name)
        return getattr(packet, overload) if overload else packet
    except (AttributeError, RuntimeError) as exc:
        raise TargetError(f"no operator {target!r} is registered (is the module that defines it "
                          f"listed in load?): {exc}") from exc


def _callable(entry: Entry, obj: Any) -> Callable:
    if entry.kind in LAYER_KINDS:
        if not callable(obj):
            raise TargetError(f"{entry.target} is not a factory (got {type(obj).__name__}): kind {entry.kind} "
                              "names a function that builds the " + ("module" if entry.kind == EntryKind.MODULE else
                                                                     "(model, make_batch, loss) triple"))
        return ModuleCall(obj) if entry.kind == EntryKind.MODULE else obj
    if entry.kind == EntryKind.FUNCTION:
        if not _autograd_function(obj):
            raise TargetError(f"{entry.target} is not a torch.autograd.Function subclass "
                              f"(got {type(obj).__name__}); use kind: callable for plain functions")
        return obj.apply
    if not callable(obj):
        raise TargetError(f"{entry.target} is not callable (got {type(obj).__name__})")
    return obj


def _autograd_function(obj: object) -> bool:
    """Whether ``obj`` is a torch.autograd.Function subclass."""
    import torch

    return inspect.isclass(obj) and issubclass(obj, torch.autograd.Function)


class ModuleCall:
    """A module factory as a callable of the forward's arguments: the module is built once (from a fixed
    seed, so every cell starts from the same parameters), deep-copied for the dtype and device of the first
    floating tensor argument and the copy cast to them (a module holding a weak reference or a closure to
    itself computes, in the copy, with the original's weights: docs/registry.md says so)."""

    SEED = 0

    def __init__(self, factory):
        self.factory = factory
        self.instances: dict = {}

    def module(self, dtype, device):
        """The module at ``dtype`` on ``device`` (built on first use)."""
        import torch

        key = (str(dtype), str(device))
        if key not in self.instances:
            if "base" not in self.instances:
                self.instances["base"] = self.fresh(self.SEED)
            import copy

            self.instances[key] = copy.deepcopy(self.instances["base"]).to(dtype=dtype, device=torch.device(device))
        return self.instances[key]

    def fresh(self, seed: int):
        """A new instance built from ``seed``, with the factory's own dtype and device."""
        import torch

        from audit.kit.models import seeded

        built = seeded(self.factory, seed)
        if not isinstance(built, torch.nn.Module):
            raise TargetError(f"the module factory returned {type(built).__name__}: expected an nn.Module")
        return built

    def __call__(self, *args):
        import torch

        tensor = next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)
        dtype, device = (tensor.dtype, tensor.device) if tensor is not None else (torch.float64, "cpu")
        return self.module(dtype, device)(*args)


def _digest(entry: Entry, obj, native_files=()) -> str:
    """sha256 of the target's code: for a Function, callable or module factory its own definition and what
    it uses (:mod:`audit.runtime.definition`: a neighbour changing in the same file does not count); for an
    op its schema and its Python modules; and the native sources or library, so that a changed kernel is
    told apart from a changed framework."""
    hasher = hashlib.sha256()
    if entry.kind == EntryKind.OP:
        hasher.update(str(getattr(obj, "_schemas", "") or getattr(obj, "_schema", "")).encode())
        files = [_module_file(item) for item in entry.load if not native.is_native(item)]
    else:
        for text in definition.sources(obj):
            hasher.update(text.encode())
        files = []
    for source in filter(None, files + [str(p) for p in native_files]):
        hasher.update(Path(source).read_bytes())
    return hasher.hexdigest()


def _module_file(name: str) -> str | None:
    module = sys.modules.get(name)
    return getattr(module, "__file__", None) if module else None

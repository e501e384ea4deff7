"""``export``: torch.export.export of the entry (wrapped in a module, with dynamic dims where the registry's
dims vary), saved, loaded, and run on drawn inputs, gives eager's outputs.

Exported once per cell, in both of export's modes, after an eager call on the same tensors, as a
deployment script does. The default (non-strict) export must pass every stage. A strict export (through
Dynamo) that refuses to trace is recorded in ``metrics``, not failed: that is loud, and often Dynamo's
limit (a Function with a custom jvp, say). One that traces but gives other outputs than eager fails: a
Python-side cache keyed by object identity, for one, is baked into it as a constant.
"""

from __future__ import annotations

import io

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.checks.tensors import compare_all, detached as _detached, outputs_of
from audit.errors import first_line
from audit.inputs.variants import resized

MODES = (("non-strict", False), ("strict", True))
STRICT_HINT = ("; the non-strict export agrees with eager, so the strict (Dynamo) trace baked in a value "
               "computed while tracing: a Python-side cache, a global or an id()-keyed lookup in forward")
#: Sizes 0 and 1 are specialised when traced: the example used for tracing stays at 2 or above.
TRACE_SIZE = 2


class EntryModule(torch.nn.Module):
    """The entry as a module: tensor arguments in, the tuple of its tensor outputs out."""

    def __init__(self, fn, template: list):
        super().__init__()
        self.fn, self.template = fn, template

    def forward(self, *tensors):
        it = iter(tensors)
        args = [next(it) if slot is None else slot.value for slot in self.template]
        return tuple(outputs_of(self.fn(*args)))


class _Value:
    def __init__(self, value):
        self.value = value


def run(subject, case) -> None:
    """Export once per cell (every stage), then each example: the loaded programs against eager."""
    if "programs" not in subject.state:
        subject.state["programs"] = _prepare(subject, case)
    if isinstance(subject.state["programs"], str):
        raise Violation(subject.state["programs"])
    tensors = _tensors(subject.args(case))
    with torch.no_grad():  # both re-seeded outside the program: a stochastic entry draws eager's noise
        expected = outputs_of(subject.guard(subject.target.fn, canonical=False)(*_detached(subject.args(case))))
    for mode, program in subject.state["programs"].items():
        try:
            # Fresh copies for each program: an in-place entry's program writes its inputs.
            got = list(subject.guard(program, clone=False, canonical=False)(*[t.clone() for t in tensors]))
        except Exception as exc:
            raise Violation(f"run ({mode}): the loaded program raised {type(exc).__name__}: {_first(exc)}") from None
        try:
            compare_all(f"run ({mode}): exported output vs eager,", got, expected, subject.tolerance())
        except Violation as exc:
            hint = STRICT_HINT if mode == "strict" else ""
            raise Violation(f"{exc}{hint}") from None


def _prepare(subject, case):
    """{mode: callable loaded program}, or the message of the first stage that failed."""
    entry = subject.entry
    sizes = {name: min(max(lo, TRACE_SIZE), hi) for name in entry.symbols for lo, hi in [entry.dim_range(name)]}
    example = _detached(subject.args(resized(entry, case, sizes)))
    template = [None if isinstance(a, torch.Tensor) else _Value(a) for a in example]
    tensors = [a for a in example if isinstance(a, torch.Tensor)]  # the very objects the warm-up sees
    with torch.no_grad():
        subject.fn(*example)  # the warm-up call a deployment script makes before exporting
    module = EntryModule(subject.fn, template)
    dynamic = _dynamic_shapes(entry, example)
    programs = {}
    for mode, strict in MODES:
        stage = "trace"
        try:
            exported = torch.export.export(module, tuple(tensors), dynamic_shapes=dynamic, strict=strict)
            stage = "save"
            buffer = io.BytesIO()
            torch.export.save(exported, buffer)
            stage = "load"
            buffer.seek(0)
            programs[mode] = torch.export.load(buffer).module()
            subject.metrics[mode] = "exported"
        except Exception as exc:
            reason = f"{stage} ({mode} export): {type(exc).__name__}: {_first(exc)}"
            if strict and stage == "trace":
                subject.metrics[mode] = f"not traced: {type(exc).__name__}: {_first(exc)}"
                continue
            return reason
    return programs


def _dynamic_shapes(entry, example) -> tuple | None:
    """A ``torch.export.Dim`` per symbolic dim whose range varies, shared across inputs."""
    dims = {name: torch.export.Dim(name, min=lo, max=hi) for name in entry.symbols
            for lo, hi in [entry.dim_range(name)] if lo < hi}
    if not dims:
        return None
    specs = [{axis: dims[size] for axis, size in enumerate(spec.shape) if size in dims} or None
             for _, spec in entry.tensor_inputs]
    return (tuple(specs),)  # forward(*tensors): one varargs tuple


def _tensors(args) -> list:
    return [a.detach() for a in args if isinstance(a, torch.Tensor)]


def _first(exc: Exception) -> str:
    return first_line(exc)[:300]


CHECK = declared(
    "export",
    run=run,
    script="""\
import io
class M(torch.nn.Module):
    def forward(self, *xs):
        it = iter(xs)
        return fn(*[next(it) if torch.is_tensor(a) else a for a in args])
tensors = tuple(a.detach() for a in args if torch.is_tensor(a))
for strict in (False, True):
    ep = torch.export.export(M(), tensors, strict=strict)
    buffer = io.BytesIO(); torch.export.save(ep, buffer); buffer.seek(0)
    print("strict" if strict else "non-strict", torch.export.load(buffer).module()(*tensors), "eager", fn(*args))
""",
)

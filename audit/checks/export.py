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
from audit.checks.interface import Violation, tolerance_values
from audit.errors import first_line
from audit.inputs.variants import resized
from audit.toolkit.tensors import compare_all, detached as _detached, outputs_of

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
    example = _detached(subject.args(traced_case(entry, case)))
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


def traced_case(entry, case):
    """``case`` at the sizes export traces with: each dim at :data:`TRACE_SIZE` where its range allows."""
    sizes = {name: min(max(lo, TRACE_SIZE), hi) for name in entry.symbols for lo, hi in [entry.dim_range(name)]}
    return resized(entry, case, sizes)


def _script_values(subject, case) -> dict:
    """The comparison, the traced example and, per tensor input, {axis: [dim, min, max]} for the dims that vary."""
    entry = subject.entry
    ranges = {name: list(entry.dim_range(name)) for name in entry.symbols if entry.dim_range(name)[0] < entry.dim_range(name)[1]}
    dynamic = [{axis: [size, *ranges[size]] for axis, size in enumerate(spec.shape) if size in ranges} or None
               for _, spec in entry.tensor_inputs] if ranges else None
    return {**tolerance_values(subject, case), "dynamic": dynamic, "example": traced_case(entry, case)}


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


SCRIPT = """\
import io


def first(exc):
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


class EntryModule(torch.nn.Module):
    \"\"\"The target as a module: its tensor arguments in, the tuple of its tensor outputs out.\"\"\"

    def __init__(self, f, template):
        super().__init__()
        self.f, self.template = f, template

    def forward(self, *tensors):
        it = iter(tensors)
        return tuple(tensors_of(self.f(*[next(it) if torch.is_tensor(a) else a for a in self.template])))


example = [a.detach() if torch.is_tensor(a) else a for a in example]  # dims at 2 where they may: what export traces
tensors = tuple(a for a in example if torch.is_tensor(a))  # the very objects the warm-up call sees
with torch.no_grad():
    _target(*example)  # the warm-up call a deployment script makes before exporting
found = {}  # dynamic: per tensor input, {axis: [dim, min, max]} for the dims whose range varies
shapes = None if dynamic is None else (tuple(
    None if spec is None else {axis: found.setdefault(n, torch.export.Dim(n, min=lo, max=hi)) for axis, (n, lo, hi) in spec.items()}
    for spec in dynamic),)
programs = {}
for mode, strict in (("non-strict", False), ("strict", True)):
    stage = "trace"
    try:
        exported = torch.export.export(EntryModule(_target, example), tensors, dynamic_shapes=shapes, strict=strict)
        stage = "save"
        buffer = io.BytesIO()
        torch.export.save(exported, buffer)
        stage = "load"
        buffer.seek(0)
        programs[mode] = torch.export.load(buffer).module()
    except Exception as exc:
        if strict and stage == "trace":  # Dynamo's refusal: loud, recorded by the audit, not a failure
            print(f"the strict export did not trace ({first(exc)}): not a failure")
            continue
        print(f"{stage} ({mode} export): {first(exc)}")
        sys.exit(1)
with torch.no_grad():
    expected = tensors_of(audited(*[a.detach() if torch.is_tensor(a) else a for a in args]))
failed = False
for mode, program in programs.items():
    try:
        got = list(guarded(program)(*[a.detach().clone() for a in args if torch.is_tensor(a)], clone=False))
    except Exception as exc:
        print(f"run ({mode}): the loaded program raised {first(exc)}")
        sys.exit(1)
    failed = failed or differs(f"run ({mode}): exported output vs eager,", got, expected)
print("an exported program differs from eager" if failed else "both exported programs give eager's outputs")
sys.exit(1 if failed else 0)
"""


CHECK = declared(
    "export",
    run=run,
    script=SCRIPT,
    script_values=_script_values,
)

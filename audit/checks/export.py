"""``export``: torch.export.export of the entry (wrapped in a module, with dynamic dims where the registry's
dims vary), saved, loaded, and run on drawn inputs, gives eager's outputs.

Exported once per cell, in both of export's modes, after an eager call on the same tensors, as a
deployment script does. The default (non-strict) export must pass every stage. A strict export (through
Dynamo) that refuses to trace is not failed: that is loud, and often Dynamo's limit (a Function with a custom
jvp, say; on torch 2.11 any setup_context-style Function). It is recorded in ``metrics``, and a cell that
holds says it judged the non-strict export only, why the strict one did not run and on which torch. One that
traces but gives other outputs than eager fails: a Python-side cache keyed by object identity, for one, is
baked into it as a constant.
"""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import Violation, tolerance_values
from audit.inputs.variants import resized
from audit.kit.calls import guarded
from audit.kit.compare import mismatches
from audit.kit.explain import first_line
from audit.kit.tensors import detached, outputs_of

#: Sizes 0 and 1 are specialised when traced: the example used for tracing stays at 2 or above.
TRACE_SIZE = 2


def export(fn, ref, args, *, target, mutates, seed, tol, dynamic, example) -> list:
    """The target exported in both modes on ``example`` (its dims at :data:`TRACE_SIZE` where they may be, dynamic
    where ``dynamic`` says), saved and loaded (:func:`exported_programs`), then each loaded program on ``args``
    against eager within ``tol`` (:func:`against_programs`)."""
    programs = exported_programs(target, example, dynamic)
    if isinstance(programs, str):
        return [programs]
    return against_programs(programs, target, args, mutates, seed, tol)


class EntryModule(torch.nn.Module):
    """The target as a module: its tensor arguments in, the tuple of its tensor outputs out; ``template`` holds
    each argument as (True, None) for a tensor, (False, value) for anything else."""

    def __init__(self, fn, template: list):
        super().__init__()
        self.fn, self.template = fn, template

    def forward(self, *tensors):
        it = iter(tensors)
        args = [next(it) if tensor else value for tensor, value in self.template]
        return tuple(outputs_of(self.fn(*args)))


def exported_programs(target, example, dynamic, notes=None):
    """{mode: the loaded program}, each of the non-strict and strict exports traced on ``example`` after an eager
    call on those very tensors (as a deployment script warms up), saved and loaded; or the message of the first
    stage that failed (a str). A strict export Dynamo refuses to trace is left out, not failed. ``notes``, if
    given, gets each mode's fate ("exported", or why it was not traced)."""
    import io

    example = detached(example)
    template = [(True, None) if isinstance(a, torch.Tensor) else (False, a) for a in example]
    with torch.no_grad():
        target(*example)
    module, shapes = EntryModule(target, template), dynamic_shapes(dynamic)
    programs = {}
    for mode, strict in (("non-strict", False), ("strict", True)):
        stage = "trace"
        try:
            exported = torch.export.export(module, tuple(a for a in example if isinstance(a, torch.Tensor)),
                                           dynamic_shapes=shapes, strict=strict)
            stage = "save"
            buffer = io.BytesIO()
            torch.export.save(exported, buffer)
            stage = "load"
            buffer.seek(0)
            programs[mode] = torch.export.load(buffer).module()
            said = "exported"
        except Exception as exc:
            if not (strict and stage == "trace"):
                return f"{stage} ({mode} export): {type(exc).__name__}: {first_line(exc)[:300]}"
            said = f"not traced: {type(exc).__name__}: {first_line(exc)[:300]}"
        if notes is not None:
            notes[mode] = said
    return programs


def dynamic_shapes(dynamic):
    """export's ``dynamic_shapes`` for the module's varargs: per tensor input, {axis: a ``torch.export.Dim``} from
    ``dynamic`` (per tensor input, {axis: [dim, min, max]} or None), one Dim per named dim; None when none varies."""
    if dynamic is None:
        return None
    dims = {}
    for spec in dynamic:
        for name, low, high in (spec or {}).values():
            dims.setdefault(name, torch.export.Dim(name, min=low, max=high))
    return (tuple(None if spec is None else {axis: dims[name] for axis, (name, _, _) in spec.items()}
                  for spec in dynamic),)


def against_programs(programs: dict, target, args, mutates, seed: int, tol) -> list:
    """Each loaded program on copies of ``args``' tensors (an in-place entry's program writes its inputs) against
    eager's outputs, both with torch's generator reset to ``seed`` outside the program."""
    with torch.no_grad():
        expected = outputs_of(guarded(target, mutates, seed)(*detached(args)))
    tensors = [a.detach() for a in args if isinstance(a, torch.Tensor)]
    for mode, program in programs.items():
        try:
            got = list(guarded(program, (), seed)(*[t.clone() for t in tensors]))
        except Exception as exc:
            return [f"run ({mode}): the loaded program raised {type(exc).__name__}: {first_line(exc)[:300]}"]
        found = mismatches(f"run ({mode}): exported output vs eager,", got, expected, tol)
        if found and mode == "strict":
            return [f"{found[0]}; the non-strict export agrees with eager, so the strict (Dynamo) trace baked in a "
                    "value computed while tracing: a Python-side cache, a global or an id()-keyed lookup in forward"]
        if found:
            return found
    return []


def run(subject, case) -> None:
    """Export once per cell (every stage), then each example: the loaded programs against eager. The stages of
    :func:`export`, the programs kept for the cell's examples."""
    if "programs" not in subject.state:
        values = _script_values(subject, case)
        subject.state["programs"] = exported_programs(subject.fn, subject.args(values["example"]), values["dynamic"],
                                                      notes=subject.metrics)
    programs = subject.state["programs"]
    if isinstance(programs, str):
        raise Violation(programs)
    if "strict" not in programs:
        subject.not_run("the strict (Dynamo) export", subject.metrics["strict"], judged="the non-strict export")
    found = against_programs(programs, subject.fn, subject.args(case), list(subject.entry.mutates), subject.seed,
                             subject.tolerance())
    if found:
        raise Violation(found[0])


def traced_case(entry, case):
    """``case`` at the sizes export traces with: each dim at :data:`TRACE_SIZE` where its range allows."""
    sizes = {name: min(max(lo, TRACE_SIZE), hi) for name in entry.symbols for lo, hi in [entry.dim_range(name)]}
    return resized(entry, case, sizes)


def _script_values(subject, case) -> dict:
    """The comparison, the traced example and, per tensor input, {axis: [dim, min, max]} for the dims that vary."""
    entry = subject.entry
    ranges = {name: list(entry.dim_range(name)) for name in entry.symbols
              if entry.dim_range(name)[0] < entry.dim_range(name)[1]}
    dynamic = [{axis: [size, *ranges[size]] for axis, size in enumerate(spec.shape) if size in ranges} or None
               for _, spec in entry.tensor_inputs] if ranges else None
    return {**tolerance_values(subject, case), "dynamic": dynamic, "example": traced_case(entry, case)}


CHECK = declared(
    "export",
    run=run,
    replay=export,
    replay_helpers=(EntryModule, exported_programs, dynamic_shapes, against_programs),
    script_values=_script_values,
)

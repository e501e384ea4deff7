"""Run one cell inside a worker: draw cases, explore the property, package the outcome."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from audit.checking import judgement, replayable
from audit.engine.explore import Counterexample, Damaged, explore
from audit.engine.script import replay_script
from audit.inputs.case import Case
from audit.inputs.special import special_for
from audit.inputs.strategies import for_check
from audit.registry.model import Entry, EntryKind
from audit.results.kinds import ErrorKind
from audit.results.outcome import CellKey, Failure, Outcome, Verdict
from audit.runtime import health, triton
from audit.runtime.isolation import isolated
from audit.runtime.options import RunOptions, cell_seed
from audit.runtime.subject import Subject
from audit.runtime.target import Target, through_backward

if TYPE_CHECKING:
    from audit.catalog.interface import Check

#: Hears each example a cell draws, before the property runs on it.
OnExample = Callable[[Case], object]


def run_cell(entry: Entry, target: Target, check: Check, key: CellKey, options: RunOptions, claimed: bool,
             on_example: OnExample | None = None) -> Outcome:
    """The outcome of ``check`` on ``entry`` at ``key``; never raises for the target's faults. Global torch
    state the cell changes (grad mode, default dtype, generators...) is put back afterwards, so that it
    cannot change the verdict of whatever runs next in this process."""
    health.own()
    with isolated():
        outcome = _settled(_run(entry, target, check, key, options, claimed, on_example))
    strays = health.forked_strays()
    if not strays or outcome.verdict == Verdict.ERRORED:
        return outcome
    health.note("the target forked a copy of the process that returned into the audit")  # after the last example
    return Outcome(key, Verdict.ERRORED, f"{health.describe_strays(strays)}; this cell's result is not trusted",
                   outcome.examples, outcome.seconds, kind=ErrorKind.FORKED.value)


def _settled(outcome: Outcome) -> Outcome:
    """A CUDA cell's outcome once what its kernels left behind asynchronously is in: a fault a kernel raised after
    the last comparison (an illegal memory access, a device-side assert) surfaces at this synchronisation, in the cell
    that caused it rather than in the next one, and the worker retires (:mod:`audit.runtime.health`)."""
    fault = health.cuda_fault() if outcome.key.device == "cuda" else ""
    if not fault:
        return outcome
    health.note(fault)
    if outcome.verdict == Verdict.ERRORED:
        return outcome
    return Outcome(outcome.key, Verdict.ERRORED, f"{fault}, found when the cell ended (a kernel's asynchronous "
                                                 "error); this cell's result is not trusted",
                   outcome.examples, outcome.seconds, kind=ErrorKind.CUDA_FAULT.value)


def _run(entry: Entry, target: Target, check: Check, key: CellKey, options: RunOptions, claimed: bool,
         on_example: OnExample | None) -> Outcome:
    skip = (_unavailable(key.device) or target.unbuilt.get(key.device, "") or _not_for_sparse(entry, check)
            or (triton.untrusted(entry, key.dtype) if key.device == "cpu" else ""))
    if skip:
        return Outcome(key, Verdict.SKIPPED, skip)
    seed = cell_seed(options.seed, entry.registered_name, key.check, key.dtype, key.device)
    subject = Subject(entry, target, key.dtype, key.device, seed, options)
    seed_global_generators(seed)

    seen: list[Case] = []

    def prop(case: Case) -> None:
        if on_example:
            on_example(case)
        if not seen:
            seen.append(case)
        judgement.examine(check, subject, case)

    examples = options.examples if claimed else options.unclaimed_examples
    examples = min(examples, check.examples) if check.examples else examples
    try:
        found = explore(prop, for_check(entry, check), examples=examples, seed_value=seed,
                        shrink=claimed and options.shrink,
                        budget=options.cell_budget(claimed), limit=options.failures, special=special_for(entry, check))
    except Damaged as exc:
        return Outcome(key, Verdict.ERRORED, f"{exc}; the search stopped there: a process in that state is not "
                                             "trusted with another example (a worker retires after it)",
                       kind=ErrorKind.DAMAGED.value)
    except SystemExit as exc:
        return Outcome(key, Verdict.ERRORED, f"the target called sys.exit({exc.code!r})", kind=ErrorKind.EXITED.value)
    metrics = dict(subject.metrics)
    if found.fault:
        named = found.fault.startswith("the entry's ")  # it names its object itself (a reference, a proxy)
        message = found.fault if named else f"{found.fault} ({_blamed(entry)})"
        return Outcome(key, Verdict.ERRORED, message, found.examples, found.seconds, details=metrics,
                       kind=ErrorKind.REGISTRY_FAULT.value)
    if found.refused:
        return _through_backward(entry, target, check, key, options, claimed, on_example, found.refused)
    if found.special:  # structured cases tried after the drawn ones (``examples`` counts the drawn)
        metrics["special_points"] = found.special
    if triton.interpreted(entry):
        metrics["triton"] = "interpreted on the CPU (TRITON_INTERPRET=1: no CUDA device here)"
    if found.skipped:
        return Outcome(key, Verdict.SKIPPED, found.skipped, found.examples, found.seconds, details=metrics)
    if found.held:
        vacuous = nothing_compared(subject, check, seen[0]) if seen else "no example was run"
        verdict = Verdict.SKIPPED if vacuous else Verdict.HELD
        return Outcome(key, verdict, vacuous or partly_judged(metrics), found.examples, found.seconds, details=metrics)
    first, *others = [_failure(entry, check, key, options, subject, failure) for failure in found.failures()]
    return Outcome(key, Verdict.VIOLATED, first.message, found.examples, found.seconds, first.case, first.script,
                   metrics, tuple(others), first.kind)


def _blamed(entry: Entry) -> str:
    """Who a registry fault that does not name its object is about: a model factory's harness (its ``make_batch`` or
    ``loss``), the entry's declared VJP, or its proxy."""
    if entry.kind == EntryKind.MODEL:
        return f"the harness {entry.target} returns, not the code the model runs"
    if entry.vjp:
        return f"the entry's declared VJP {entry.vjp}, not the target"
    return f"the entry's proxy {entry.proxy}, not the target" if entry.proxy else "not the target"


#: Why a check whose gradients .backward() cannot stand for says nothing of a target that refuses .grad().
NOT_THROUGH_BACKWARD = ("the target refuses torch.autograd.grad ({said}), and this check takes a gradient the audit's "
                        ".backward() adapter does not reach (of copies or modules it builds itself, under a "
                        "transform, or of the gradient itself): not judged")


def _through_backward(entry: Entry, target: Target, check: Check, key: CellKey, options: RunOptions, claimed: bool,
                      on_example: OnExample | None, said: str) -> Outcome:
    """The cell again with every gradient taken through torch.autograd.backward (``backward_only``), the target
    having refused .grad() ("... is not compatible with .grad(), please use .backward()"); recorded in the cell's
    ``metrics.backward_only``. An entry that already says so, refused again, is a skip: the check takes its
    gradients where .backward() cannot stand in."""
    if entry.backward_only:
        return Outcome(key, Verdict.SKIPPED, NOT_THROUGH_BACKWARD.format(said=said))
    again = _run(replace(entry, backward_only=True), replace(target, fn=through_backward(target.fn)), check, key,
                 options, claimed, on_example)
    note = f"detected: the target refused torch.autograd.grad ({said}); every gradient taken through .backward()"
    return replace(again, details={**again.details, "backward_only": note})


def partly_judged(metrics: dict[str, Any]) -> str:
    """What a cell that held judged when part of its check could not run (see :meth:`Subject.not_run`), with each
    part's reason and the torch version; "" when all of it ran."""
    not_run = metrics.get("not_run")
    if not not_run:
        return ""
    parts = "; ".join(f"{part} did not run: {why}" for part, why in sorted(not_run.items()))
    return f"judged {metrics['judged']} only; {parts}"


def nothing_compared(subject: Subject, check: Check, case: Case) -> str:
    """Why a property that held compared nothing ("" when it compared something): the target returned no tensor,
    or, for a check about gradients, no output carries a gradient. Read from one more call on the first example
    drawn, whatever way the check itself called the target. A target that raises here, a model and an entry that
    writes its inputs in place are left to the check's verdict."""
    import torch

    if subject.entry.kind == EntryKind.MODEL or subject.entry.mutates:  # an in-place target's output is its input
        return ""
    try:
        args = subject.args(case)
        with torch.enable_grad():
            out = subject.evaluate(*args)
    except Exception:
        return ""
    tensors = [t for t in _leaves(out) if isinstance(t, torch.Tensor)]
    if not tensors:
        return (f"nothing to compare: the target returned no tensor ({type(out).__name__}) on "
                f"{case.describe()}")
    if not check.needs_gradient or any(t.requires_grad for t in tensors):
        return ""
    if not any(isinstance(a, torch.Tensor) and a.requires_grad for a in args):
        return "nothing to compare: no input requires a gradient"
    kinds = ", ".join(sorted({str(t.dtype).removeprefix("torch.") for t in tensors}))
    return (f"nothing to compare: no output carries a gradient (outputs of dtype {kinds}, none attached to the "
            "graph: integer, detached or marked non-differentiable)")


def _leaves(out: object) -> list[object]:
    """The values in ``out``, through tuples, lists and dicts."""
    if isinstance(out, (tuple, list)):
        return [leaf for item in out for leaf in _leaves(item)]
    if isinstance(out, dict):
        return [leaf for item in out.values() for leaf in _leaves(item)]
    return [out]


def _failure(entry: Entry, check: Check, key: CellKey, options: RunOptions, subject: Subject,
             found: Counterexample) -> Failure:
    """One failure as the outcome carries it: its message with where it showed, its case, its replay script."""
    script = replay_script(entry, check, found.case, dtype=key.dtype, device=key.device, seed=options.seed,
                           message=found.message, base=str(Path(options.base).resolve()),
                           values=replayable.values(check, subject, found.case),
                           reference=replayable.compared_reference(subject, found.case) is not None)
    where = f"; on {found.case.describe()}" if found.case.args else ""
    return Failure(f"{found.message}{where}", found.case.to_json(), script, found.kind)


def seed_global_generators(seed: int) -> None:
    """A target that draws from the global generators draws the same numbers in a cell wherever it runs:
    whatever ran before in this worker, sharded or not."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _not_for_sparse(entry: Entry, check: Check) -> str:
    """Why ``check`` is a skip for ``entry`` because an input is sparse ("" when it is not, or the check applies)."""
    if not (entry.sparse and check.not_for_sparse):
        return ""
    names = ", ".join(f"input {i} ({spec.sparse_layout})" for i, spec in entry.tensor_inputs if spec.sparse_layout)
    return f"not applicable to sparse inputs ({names}): {check.not_for_sparse}"


def _unavailable(device: str) -> str:
    import torch

    if device == "cuda" and not torch.cuda.is_available():
        return "CUDA is not available here (torch.cuda.is_available() is False)"
    if device == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        return "MPS is not available here (torch.backends.mps.is_available() is False)"
    return ""

"""Run one cell inside a worker: draw cases, explore the property, package the outcome."""

from __future__ import annotations

from pathlib import Path

from audit.engine.explore import explore
from audit.engine.script import replay_script
from audit.inputs.special import special_for
from audit.inputs.strategies import for_check
from audit.results.outcome import CellKey, Failure, Outcome, Verdict
from audit.runtime.isolation import isolated
from audit.runtime.options import RunOptions, cell_seed
from audit.runtime.subject import Subject


def run_cell(entry, target, check, key: CellKey, options: RunOptions, claimed: bool, on_example=None) -> Outcome:
    """The outcome of ``check`` on ``entry`` at ``key``; never raises for the target's faults. Global torch
    state the cell changes (grad mode, default dtype, generators...) is put back afterwards, so that it
    cannot change the verdict of whatever runs next in this process."""
    with isolated():
        return _run(entry, target, check, key, options, claimed, on_example)


def _run(entry, target, check, key: CellKey, options: RunOptions, claimed: bool, on_example) -> Outcome:
    skip = _unavailable(key.device) or target.unbuilt.get(key.device, "") or _not_for_sparse(entry, check)
    if skip:
        return Outcome(key, Verdict.SKIPPED, skip)
    seed = cell_seed(options.seed, entry.name, key.check, key.dtype, key.device)
    subject = Subject(entry, target, key.dtype, key.device, seed, options)
    seed_global_generators(seed)

    def prop(case):
        if on_example:
            on_example(case)
        check.run(subject, case)

    examples = options.examples if claimed else options.unclaimed_examples
    examples = min(examples, check.examples) if check.examples else examples
    try:
        found = explore(prop, for_check(entry, check), examples=examples, seed_value=seed, shrink=claimed,
                        budget=options.cell_budget(claimed), limit=options.failures, special=special_for(entry, check))
    except SystemExit as exc:
        return Outcome(key, Verdict.ERRORED, f"the target called sys.exit({exc.code!r})")
    metrics = dict(subject.metrics)
    if found.special:  # structured cases tried after the drawn ones (``examples`` counts the drawn)
        metrics["special_points"] = found.special
    if found.skipped:
        return Outcome(key, Verdict.SKIPPED, found.skipped, found.examples, found.seconds, details=metrics)
    if found.held:
        return Outcome(key, Verdict.HELD, "", found.examples, found.seconds, details=metrics)
    first = _failure(entry, check, key, options, subject, found)
    others = tuple(_failure(entry, check, key, options, subject, other) for other in found.others)
    return Outcome(key, Verdict.VIOLATED, first.message, found.examples, found.seconds, first.case, first.script,
                   metrics, others)


def _failure(entry, check, key: CellKey, options: RunOptions, subject: Subject, found) -> Failure:
    """One failure as the outcome carries it: its message with where it showed, its case, its replay script."""
    script = replay_script(entry, check, found.case, dtype=key.dtype, device=key.device, seed=options.seed,
                           message=found.message, base=str(Path(options.base).resolve()),
                           tolerance=subject.tolerance(tight=True), rng_seed=subject.seed,
                           values=check.script_values(subject, found.case) if check.script_values else {})
    where = f"; on {found.case.describe()}" if found.case.args else ""
    return Failure(f"{found.message}{where}", found.case.to_json(), script)


def seed_global_generators(seed: int) -> None:
    """A target that draws from the global generators draws the same numbers in a cell wherever it runs:
    whatever ran before in this worker, sharded or not."""
    import random

    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def _not_for_sparse(entry, check) -> str:
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

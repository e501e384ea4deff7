"""``audit diff OLD NEW``: every regression between two matrices, of verdict and, where both runs recorded it, of
behaviour (:mod:`audit.behaviour`); exit 1 on any."""

from __future__ import annotations

from pathlib import Path

import click

from audit.behaviour import store
from audit.behaviour.compare import BehaviourDiff, Options, compare
from audit.core.contract import Exit
from audit.core.errors import UsageError
from audit.core.io import json_text, write_atomic
from audit.reporters.changes import render_markdown, render_text
from audit.results.changes import diff
from audit.results.matrix import Matrix, read_matrix


def diff_command(old: str, new: str, output_format: str, out: str | None, slowdown: float | None = None) -> int:
    """Compare ``old`` with ``new``; print (or write to ``out``) in the chosen format. ``slowdown``: a cost that grew
    by this factor (beyond the noise) gates too."""
    before, after = read_matrix(old), read_matrix(new)
    result = diff(before, after)
    behaviour = behaviour_diff(old, new, before, after, slowdown)
    if output_format == "json":
        text = json_text(result.to_json() | {"behaviour": behaviour.to_json(),
                                             "verdict": _verdict(result.regressed or behaviour.regressed)})
    elif output_format == "md":
        text = render_markdown(result, behaviour)
    else:
        text = render_text(result, behaviour)
    if out:
        write_atomic(Path(out), text)
    else:
        click.echo(text, nl=False)
    return Exit.GATE_FAILED if result.regressed or behaviour.regressed else Exit.OK


def behaviour_diff(old: str, new: str, before: Matrix, after: Matrix, slowdown: float | None) -> BehaviourDiff:
    """The behaviour records beside the two matrices compared (a note when one has none); the compile cells'
    facts come from the matrices themselves."""
    records = store.read(old, {"behaviour": before.behaviour}), store.read(new, {"behaviour": after.behaviour})
    if None not in records:
        _require_torch()
    owners = {e.name: e.owners for e in after.entries}
    folder = Path(old).parent
    repro = f"audit recheck {{entry}} --against {folder.as_posix()}"
    if after.registry:
        repro += f" --registry {after.registry}"
    return compare(*records, _compile_cells(before, after), Options(repro, owners, slowdown))


def _compile_cells(before: Matrix, after: Matrix) -> dict:
    olds = {(e.name, c.dtype, c.device): c.metrics for e, c in before.pairs() if c.check == "compile"}
    return {(e.name, c.dtype, c.device): (e.kind, olds[(e.name, c.dtype, c.device)], c.metrics)
            for e, c in after.pairs() if c.check == "compile" and (e.name, c.dtype, c.device) in olds}


def _verdict(regressed: bool) -> str:
    return "regression" if regressed else "no regression"


def _require_torch() -> None:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        raise UsageError("both matrices have behaviour records, and comparing their tensors needs PyTorch: install "
                         "it here, or compare verdicts only by diffing copies of the matrices without their "
                         "\"behaviour\" key")

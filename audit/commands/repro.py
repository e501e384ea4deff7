"""``audit repro``: replay one cell's shrunk failing case in this process and show it in full."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from audit.commands.select import check_table
from audit.core.contract import Exit
from audit.core.errors import UsageError
from audit.registry.load import load_registry
from audit.results.cells import Cell
from audit.results.matrix import Matrix


def repro(entry, check, registry, dtype, device, seed, examples, matrix, compile_backend="aot_eager",
          failure: int = 1) -> int:
    """Replay the stored case of the cell's ``failure``-th distinct failure (or search again with the seed);
    exit 1 when the failure reproduces."""
    from audit.runtime.subject import Subject
    from audit.runtime.options import RunOptions, cell_seed
    from audit.engine.replay import replay_case
    from audit.runtime.target import resolve

    loaded = load_registry(registry)
    chosen = loaded.entry(entry) or _unknown(entry, loaded)
    checks = check_table(loaded)
    if check not in checks:
        raise UsageError(f"unknown check {check!r}; known: {', '.join(checks)}")
    dtype = dtype or checks[check].dtypes(chosen)[0]
    target = resolve(chosen, Path(loaded.path).resolve().parent)
    subject = Subject(chosen, target, dtype, device, cell_seed(seed, entry, check, dtype, device),
                      RunOptions(examples=examples, seed=seed, compile_backend=compile_backend))
    case = _stored_case(Path(matrix), entry, check, dtype, device, seed, failure)
    if case is None:
        click.echo(f"no stored case for this cell in {matrix}; searching with seed {seed} ...")
        case = _search(checks[check], subject, examples)
        if case is None:
            click.echo(f"{entry} {check} ({dtype}, {device}): held on {examples} examples; nothing to replay")
            return Exit.OK
    click.echo(f"{entry} {check} ({dtype}, {device}), seed {seed}, owner {', '.join(chosen.owners)}")
    click.echo(describe_inputs(subject.args(case)))
    said = replay_case(checks[check], subject, case)
    if said:
        click.echo(f"FAIL: {said}")
        return Exit.GATE_FAILED
    click.echo("held: the stored case no longer fails")
    return Exit.OK


def _unknown(name: str, registry):
    raise UsageError(f"no entry named {name!r}; the registry has: {', '.join(e.name for e in registry.entries)}")


def _stored_case(path: Path, entry, check, dtype, device, seed, failure: int = 1):
    from audit.inputs.case import Case

    if not path.is_file():
        return None
    matrix = Matrix.from_json(json.loads(path.read_text()))
    if (matrix.environment or {}).get("seed") != seed:
        return None
    for stored, cell in matrix.pairs():
        if stored.name == entry and (cell.check, cell.dtype, cell.device) == (check, dtype, device) and cell.case:
            return Case.from_json(_nth_case(cell, failure))
    return None


def _nth_case(cell: Cell, failure: int) -> dict[str, Any]:
    """The case of the cell's ``failure``-th distinct failure (1: the first, the cell's own ``case``)."""
    if failure == 1:
        case = cell.case
    else:
        found = cell.failures
        if failure > len(found):
            raise UsageError(f"the cell has {max(len(found), 1)} failure(s); --failure {failure} is not one of them")
        case = found[failure - 1].case
    if case is None:  # a matrix written by hand or by another tool: a failure without its case
        raise UsageError(f"the cell's failure {failure} has no stored case to replay")
    return case


def _search(check, subject, examples: int):
    from audit.checking import judgement
    from audit.engine.explore import explore
    from audit.inputs.special import special_for
    from audit.inputs.strategies import for_check

    found = explore(lambda case: judgement.examine(check, subject, case), for_check(subject.entry, check),
                    examples=examples, seed_value=subject.seed, special=special_for(subject.entry, check))
    return None if found.held else found.case


def describe_inputs(args) -> str:
    """Every argument: dtype, shape, strides and values (tensors), or the value itself."""
    import torch

    lines = []
    for i, arg in enumerate(args):
        if isinstance(arg, torch.Tensor) and arg.layout != torch.strided:
            lines.append(_sparse_input(i, arg))
        elif isinstance(arg, torch.Tensor):
            values = arg.detach().cpu().tolist()
            lines.append(f"  input {i}: {arg.dtype} shape {list(arg.shape)} strides {list(arg.stride())} "
                         f"requires_grad={arg.requires_grad} device={arg.device}\n    values {values!r}")
        else:
            lines.append(f"  input {i}: {arg!r}")
    return "\n".join(lines)


def _sparse_input(i: int, arg) -> str:
    """A sparse argument: its layout, shape, and where (indices) it specifies which values."""
    coo = arg.detach().cpu().to_sparse_coo().coalesce()
    return (f"  input {i}: {arg.dtype} {str(arg.layout).replace('torch.', '')} shape {list(arg.shape)} "
            f"({coo.values().numel()} specified) requires_grad={arg.requires_grad} device={arg.device}\n"
            f"    indices {coo.indices().t().tolist()!r}\n    values {coo.values().tolist()!r}")

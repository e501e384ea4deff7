"""``audit merge``: shard matrices into the one matrix an unsharded run would have written."""

from __future__ import annotations

import dataclasses
import shutil

import click
from pathlib import Path

from audit.app import outlock
from audit.app import publish
from audit.core.contract import Exit
from audit.core.replays import cell_scripts, script_command
from audit.results.matrix import Matrix, MatrixEntry, read_matrix
from audit.app.shard import merge


def merge_command(shards, out: str, strict: bool, output_format: str = "text") -> int:
    """Merge, write ``matrix.json`` and ``matrix.md`` (and copy replay scripts), exit 1 if the gate fails."""
    read = [(path, read_matrix(path)) for path in shards]
    merged = merge(read, strict)
    if any(matrix.behaviour for _, matrix in read):
        click.echo("behaviour records are per shard and not merged: compare each shard's matrix with audit diff",
                   err=True)
    folder = Path(out)
    wanted = {name for e, c in merged.pairs() for name in cell_scripts(e.name, c)}
    merged = _point_replays(merged, out)
    with outlock.exclusive(folder):
        publish.drop_stale_scripts(folder, _copy_scripts(shards, folder, wanted))
        publish.write_all(folder, merged)
    publish.show(merged, output_format)
    return Exit.GATE_FAILED if merged.verdict == "fail" else Exit.OK


def _point_replays(merged: Matrix, out: str) -> Matrix:
    """Point each listed failure's replay command at its script's copy in ``out``, as an unsharded run into
    ``out`` names it (a shard's matrix names the shard's own folder)."""
    return dataclasses.replace(merged, entries=tuple(_pointed(entry, out) for entry in merged.entries))


def _pointed(entry: MatrixEntry, out: str) -> MatrixEntry:
    """``entry`` with its cells' failures replayed from ``out``."""
    cells = tuple(dataclasses.replace(cell, failures=tuple(
        dataclasses.replace(failure, repro=script_command(out, name))
        for failure, name in zip(cell.failures, cell_scripts(entry.name, cell)))) for cell in entry.cells)
    return dataclasses.replace(entry, cells=cells)


def _copy_scripts(shards, folder: Path, wanted: set[str]) -> set[str]:
    """Copy the shards' replay scripts of the merged cells into ``folder/repro``; their names."""
    kept = set()
    for path in shards:
        scripts = Path(path).resolve().parent / "repro"
        for script in sorted(scripts.glob("*.py")) if scripts.is_dir() else ():
            if script.name not in wanted:
                continue
            kept.add(script.name)
            target = folder / "repro" / script.name
            if script.resolve() != target.resolve():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(script, target)
    return kept

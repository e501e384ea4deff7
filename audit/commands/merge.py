"""``audit merge``: shard matrices into the one matrix an unsharded run would have written."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import click

from audit import matrix as matrix_mod
from audit.commands.diff import read_matrix
from audit.contract import Exit
from audit.reporters import markdown, terminal
from audit.shard import merge


def merge_command(shards, out: str, strict: bool) -> int:
    """Merge, write ``matrix.json`` and ``matrix.md`` (and copy replay scripts), exit 1 if the gate fails."""
    merged = merge([(path, read_matrix(path)) for path in shards], strict)
    folder = Path(out)
    for path in shards:
        scripts = Path(path).resolve().parent / "repro"
        if scripts.is_dir() and scripts.resolve() != (folder / "repro").resolve():
            (folder / "repro").mkdir(parents=True, exist_ok=True)
            for script in sorted(scripts.glob("*.py")):
                shutil.copyfile(script, folder / "repro" / script.name)
    matrix_mod.write_atomic(folder / "matrix.md", markdown.render(merged))
    matrix_mod.write_atomic(folder / "matrix.json", matrix_mod.dumps(merged))
    click.echo(terminal.render(merged, color=sys.stdout.isatty()))
    return Exit.GATE_FAILED if merged["verdict"] == "fail" else Exit.OK

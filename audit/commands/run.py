"""``audit run``: registry to matrix, reports and replay scripts; the exit code is the gate."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import click

from audit import matrix as matrix_mod
from audit.commands.select import check_table, checks_dir, select_checks, select_entries
from audit.contract import Exit
from audit.errors import UsageError
from audit.registry.load import load_registry
from audit.reporters import markdown, terminal


def run(registry, out, select, checks, devices, examples, seed, jobs, timeout, max_memory, strict,
        progress, compile_backend="aot_eager") -> int:
    """Audit the selected entries; write ``matrix.json``, ``matrix.md`` and replay scripts to ``out``."""
    from audit.engine.options import RunOptions
    from audit.engine.run import run as run_engine
    from audit.progress import progress as make_progress

    loaded = load_registry(registry)
    entries = select_entries(loaded, select)
    table = check_table(loaded)
    only = select_checks(table, checks)
    options = RunOptions(examples=examples, seed=seed, timeout=timeout, max_memory=parse_size(max_memory),
                         jobs=jobs, base=str(Path(registry).resolve().parent), checks_dir=str(checks_dir(loaded)),
                         compile_backend=compile_backend)
    with make_progress(progress) as reporter:
        result = run_engine(loaded, entries, table, options, only=only, devices=set(devices) or None,
                            on_event=reporter)
    if not result.entries:
        raise UsageError("nothing selected: no entry has a cell for the chosen checks and devices")
    matrix = matrix_mod.build(result, loaded, seed)
    matrix["verdict"] = matrix_mod.verdict(matrix_mod.cells_of(matrix), strict)
    _write(Path(out), matrix, result)
    click.echo(terminal.render(matrix, color=sys.stdout.isatty(), width=_width()))
    return Exit.GATE_FAILED if matrix["verdict"] == "fail" else Exit.OK


def _write(out: Path, matrix: dict, result) -> None:
    for entry in result.entries:
        for cell in entry.cells:
            if cell.script:
                name = f"{entry.entry.name}__{cell.check}__{cell.dtype}__{cell.device}.py"
                matrix_mod.write_atomic(out / "repro" / re.sub(r"[^\w.-]", "_", name), cell.script)
    matrix_mod.write_atomic(out / "matrix.md", markdown.render(matrix))
    matrix_mod.write_atomic(out / "matrix.json", matrix_mod.dumps(matrix))


def _width() -> int:
    import shutil

    return max(100, shutil.get_terminal_size((160, 24)).columns)


def parse_size(text: str) -> int:
    """``"512M"``, ``"4G"``, ``"1024"`` (bytes) or ``"0"`` (no cap) to bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise UsageError(f"--max-memory: expected a size like 512M or 4G, got {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)

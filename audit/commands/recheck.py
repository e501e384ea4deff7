"""``audit recheck NAME --against OLD_OUT``: one entry's behaviour recorded here again and compared with an old
record, the replay of a behaviour change that ``audit diff`` reported; exit 1 while it moves."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from audit.behaviour import store
from audit.behaviour.compare import compare
from audit.behaviour.recorder import record
from audit.core.contract import Exit
from audit.core.errors import UsageError
from audit.registry.load import load_registry
from audit.reporters.behaviour import summary, text_lines
from audit.results.matrix import read_matrix
from audit.runtime.options import RunOptions


def recheck(entry: str, against: str, registry: str, dtype: str | None) -> int:
    """Record ``entry`` here (in ``dtype`` alone if given) and compare it with the record in ``against``."""
    loaded = load_registry(registry)
    chosen = loaded.entry(entry)
    if chosen is None:
        raise UsageError(f"no entry {entry!r} in {registry}")
    matrix_path = str(Path(against) / "matrix.json")
    old = store.read(matrix_path, {"behaviour": read_matrix(matrix_path).behaviour})
    if old is None or entry not in old.entries:
        raise UsageError(f"{against}: no behaviour record of {entry!r} (record the old environment with audit run "
                         "--record)")
    if dtype is not None and dtype not in chosen.supports.dtypes:
        raise UsageError(f"--dtype {dtype}: {entry} claims {', '.join(chosen.supports.dtypes)}")
    options = RunOptions(seed=old.seed, base=str(Path(loaded.path).resolve().parent))
    with tempfile.TemporaryDirectory(prefix="audit-recheck-") as folder:
        key = record(loaded, [chosen], Path(folder), options, ("cpu", "cuda"), {}, old.folder,
                     dtypes=(dtype,) if dtype else None)
        new = store.read(str(Path(folder) / "matrix.json"), {"behaviour": key})
        kept = {entry: old.entries[entry]}
        found = compare(store.Record(old.folder, old.registry_sha256, old.seed, old.environment, old.numerics, kept,
                                     old.files), new)
    lines = summary(found) + [line for line in text_lines(found) if dtype is None or _in(line, dtype)]
    click.echo("\n".join(lines))
    return Exit.GATE_FAILED if found.regressed else Exit.OK


def _in(line: str, dtype: str) -> bool:
    """Whether a report line is about ``dtype`` (or about no dtype in particular)."""
    from audit.core.contract import DTYPE_ORDER

    return dtype in line or not any(f" {d}, " in line for d in DTYPE_ORDER)

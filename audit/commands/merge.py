"""``audit merge``: shard matrices into the one matrix an unsharded run would have written."""

from __future__ import annotations

import shutil
from pathlib import Path

from audit import reports
from audit.commands.diff import read_matrix
from audit.commands.run import show
from audit.contract import Exit
from audit.shard import merge


def merge_command(shards, out: str, strict: bool, output_format: str = "terminal") -> int:
    """Merge, write ``matrix.json`` and ``matrix.md`` (and copy replay scripts), exit 1 if the gate fails."""
    merged = merge([(path, read_matrix(path)) for path in shards], strict)
    folder = Path(out)
    for path in shards:
        scripts = Path(path).resolve().parent / "repro"
        if scripts.is_dir() and scripts.resolve() != (folder / "repro").resolve():
            (folder / "repro").mkdir(parents=True, exist_ok=True)
            for script in sorted(scripts.glob("*.py")):
                shutil.copyfile(script, folder / "repro" / script.name)
    reports.write_all(folder, merged)
    show(merged, output_format)
    return Exit.GATE_FAILED if merged["verdict"] == "fail" else Exit.OK

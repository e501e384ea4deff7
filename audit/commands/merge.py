"""``audit merge``: shard matrices into the one matrix an unsharded run would have written."""

from __future__ import annotations

import shutil
from pathlib import Path

from audit import outlock
from audit import publish
from audit.commands.diff import read_matrix
from audit.commands.run import drop_stale_scripts, show
from audit.contract import Exit
from audit.replays import cell_scripts, script_command
from audit.shard import merge


def merge_command(shards, out: str, strict: bool, output_format: str = "text") -> int:
    """Merge, write ``matrix.json`` and ``matrix.md`` (and copy replay scripts), exit 1 if the gate fails."""
    merged = merge([(path, read_matrix(path)) for path in shards], strict)
    folder = Path(out)
    wanted = {name for e in merged["entries"] for c in e["cells"] for name in cell_scripts(e["name"], c)}
    _point_replays(merged, out)
    with outlock.exclusive(folder):
        drop_stale_scripts(folder, _copy_scripts(shards, folder, wanted))
        publish.write_all(folder, merged)
    show(merged, output_format)
    return Exit.GATE_FAILED if merged["verdict"] == "fail" else Exit.OK


def _point_replays(merged: dict, out: str) -> None:
    """Point each listed failure's replay command at its script's copy in ``out``, as an unsharded run into
    ``out`` names it (a shard's matrix names the shard's own folder)."""
    for entry in merged["entries"]:
        for cell in entry["cells"]:
            for failure, name in zip(cell.get("failures", ()), cell_scripts(entry["name"], cell)):
                failure["repro"] = script_command(out, name)


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

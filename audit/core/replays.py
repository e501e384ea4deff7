"""Where replay scripts lie in an output folder (``repro/``), and the command that runs each one."""

from __future__ import annotations

import re
import shlex
from pathlib import Path


def script_name(entry: str, check: str, dtype: str, device: str, number: int = 1) -> str:
    """The file name of a cell's replay script under ``repro/``: its ``number``-th distinct failure's (the
    first keeps the plain name, the others end in ``-2``, ``-3``)."""
    suffix = f"-{number}" if number > 1 else ""
    return re.sub(r"[^\w.-]", "_", f"{entry}__{check}__{dtype}__{device}{suffix}.py")


def cell_scripts(entry: str, cell) -> list[str]:
    """The names of the replay scripts a matrix cell (a :class:`audit.results.cells.Cell`) has, one per
    failure it lists."""
    count = max(1, len(cell.failures))
    return [script_name(entry, cell.check, cell.dtype, cell.device, n) for n in range(1, count + 1)]


def script_command(out: str, name: str) -> str:
    """The command that runs the replay script ``name`` written under ``out/repro``."""
    return shlex.join(["python", str(Path(out) / "repro" / name)])

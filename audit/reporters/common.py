"""What every reporter shares: columns present, the worst status of a group, failure lines."""

from __future__ import annotations

from collections import Counter

import re
from dataclasses import replace

from audit.catalog.checks import CATALOG
from audit.core.contract import Status
from audit.registry.model import LAYER_KINDS
from audit.reporters.statuses import SEVERITY
from audit.results.cells import Cell, CellFailure
from audit.results.matrix import Matrix, MatrixEntry
from audit.runtime.fingerprint import METRIC as PATCHED

SHOWN = (Status.FAIL, Status.ERROR)


def columns(matrix: Matrix) -> list[str]:
    """The checks that have at least one cell, contract order first, then local checks by name."""
    present = {c.check for c in matrix.cells()}
    extra = sorted(present - set(CATALOG))
    return [name for name in CATALOG if name in present] + extra


def short(name: str) -> str:
    """A check's short column heading: a built-in check's declared ``short``, else its name."""
    declared = CATALOG.get(name)
    return declared.short if declared is not None and declared.short else name


def worst(cells: list[Cell]) -> Status | None:
    """The most severe status among ``cells`` (None when there are none): what a group of cells (one check,
    several dtypes or devices) is shown as."""
    statuses = {c.status for c in cells}
    return next((s for s in SEVERITY if s in statuses), None)


def group(entry: MatrixEntry, check: str, device: str | None = None) -> list[Cell]:
    """An entry's cells for one check (on one device, when given)."""
    return [c for c in entry.cells if c.check == check and device in (None, c.device)]


def rows(matrix: Matrix) -> list[tuple[MatrixEntry, str | None]]:
    """(entry, device) table rows: one per device the entry has cells on, when devices differ."""
    devices = {c.device for c in matrix.cells()}
    if len(devices) <= 1:
        return [(e, None) for e in matrix.entries]
    return [(e, d) for e in matrix.entries for d in dict.fromkeys(c.device for c in e.cells)]


def row_label(entry: MatrixEntry, device: str | None) -> str:
    """An entry's name (with its layer when it is a module or model), and the device when rows are
    split by device."""
    name = f"{entry.name} [{entry.kind}]" if entry.kind in LAYER_KINDS else entry.name
    return name if device is None else f"{name} ({device})"


def owner_groups(matrix: Matrix) -> list[tuple[str, Matrix]]:
    """(owner, the matrix narrowed to that owner's entries), owners sorted; an entry with several owners
    appears under each."""
    owners = sorted({o for e in matrix.entries for o in e.owners or ["(no owner)"]})
    return [(o, replace(matrix, entries=tuple(e for e in matrix.entries if o in (e.owners or ["(no owner)"]))))
            for o in owners]


def problems(matrix: Matrix, statuses=SHOWN) -> list[tuple[MatrixEntry, Cell]]:
    """(entry, cell) for every cell with one of ``statuses``, in matrix order."""
    return [(e, c) for e, c in matrix.pairs() if c.status in statuses]


#: C0 and C1 control characters except tab and newline (ESC starts terminal escapes: colours, hyperlinks,
#: a cleared screen), and DEL. Any string from a registry or an exception may carry them.
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tab and newline kept)."""
    return _CONTROL.sub("", text)


def markdown_text(text: str) -> str:
    """``text`` safe inside a Markdown table cell or list item: one line, no raw HTML, no table breaks,
    no code spans opened by the data."""
    text = printable(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("|", "\\|").replace("\n", " ").replace("`", "'")


def registry_of(matrix: Matrix) -> str:
    """The registry's path as the matrix records it (older matrices may not)."""
    return matrix.registry or "registry.yaml"


def failure_line(entry: MatrixEntry, cell: Cell, registry: str = "registry.yaml") -> str:
    """Where it is registered, what, where, by how much, who owns it, and the command that replays it."""
    owners = ", ".join(entry.owners)
    return (f"{registry}:{entry.registry_line}: {entry.name} {cell.check} {cell.status.value.upper()} "
            f"({cell.dtype}, {cell.device}): {cell.message}; owner {owners}; repro: {cell.repro}")


def further_failures(cell: Cell) -> list[CellFailure]:
    """A cell's distinct failures after the first, which its own ``message`` and ``repro`` say."""
    return list(cell.failures)[1:]


def also_line(failure: CellFailure) -> str:
    """One further failure of a cell: what it said, and the command that runs its own replay script."""
    replay = f"; repro: {failure.repro}" if failure.repro else ""
    return f"also: {failure.message}{replay}"


def also_lines(cell: Cell) -> list[str]:
    """A line for each of a cell's further failures (none when it has one)."""
    return [also_line(f) for f in further_failures(cell)]


def patch_lines(matrix: Matrix) -> list[str]:
    """One line per change an entry made to torch itself (a package that patches torch when imported), each once,
    in matrix order: ``softmax_pkg: importing pkg replaced torch.softmax: every model that imports it computes
    something else``."""
    found: dict[str, None] = {}
    for entry, cell in matrix.pairs():
        for sentence in cell.metrics.get(PATCHED, ()):
            found[f"{entry.name}: {sentence}: every model that imports it computes something else"] = None
    return list(found)


def headline(matrix: Matrix) -> str:
    """One line: the verdict, then what gates apart from what does not. Claimed cells first (they decide the
    verdict), then the unclaimed probes (dtype probes, properties not claimed: information, never the gate,
    but for an ``xpass`` under ``--strict``), each counted in the contract's order of statuses:
    ``autograd-audit: FAIL: 3 fail, 1 error (claimed); 47 error, 12 unsupported in unclaimed probes (do not gate)``.
    The same line heads the terminal, Markdown, HTML, JUnit and GitHub reports."""
    cells = [cell for entry in matrix.entries for cell in entry.cells]
    parts = [f"{_counts(c for c in cells if c.claimed) or 'no cell'} (claimed)"]
    probes = _counts(c for c in cells if not c.claimed)
    if probes:
        gated = matrix.verdict == "fail" and not any(c.claimed and c.gates(False) for c in cells)
        parts.append(f"{probes} in unclaimed probes ({'their xpass gates under --strict' if gated else 'do not gate'})")
    return f"autograd-audit: {(matrix.verdict or '?').upper()}: " + "; ".join(parts + [unverified(matrix)] * bool(
        matrix.unverified()))


#: Entries that verified nothing named in the headline before the rest are counted.
UNVERIFIED_NAMED = 8


def unverified(matrix: Matrix) -> str:
    """``2 entries verified nothing (every claimed cell skipped): a (CUDA is not available here), b (...)``."""
    found = matrix.unverified()
    named = ", ".join(f"{name} ({why[:80]})" for name, why in found[:UNVERIFIED_NAMED])
    more = f", and {len(found) - UNVERIFIED_NAMED} more" if len(found) > UNVERIFIED_NAMED else ""
    count = len(found)
    return (f"{count} entr{'ies' if count != 1 else 'y'} verified nothing (every claimed cell skipped; fails under "
            f"--strict or fail_unverified): {named}{more}")


def _counts(cells) -> str:
    found = Counter(cell.status for cell in cells)
    return ", ".join(f"{found[s]} {s.value}" for s in Status if found[s])

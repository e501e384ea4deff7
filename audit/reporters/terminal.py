"""The failures, then the matrix as rich tables that fit the terminal, then the verdict; returned as text.

The table never truncates a heading: when the columns do not fit the width, they are split into groups that do,
each a table of its own with the entry column repeated (and where even one column does not fit beside the
entries' names, each row is listed as a line instead). Rows whose every cell is a ``skip`` for one same reason
(the CUDA rows on a machine without a GPU) are collapsed into one line: ``cuda: 9 entries skipped: ...``.
"""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from audit.core.contract import Status
from audit.results.cells import Cell
from audit.results.matrix import Matrix
from audit.reporters import causes
from audit.reporters.common import (SHOWN, columns, group, headline, owner_groups, patch_lines, printable, registry_of,
                                    row_label, rows, short, worst)
from audit.reporters.statuses import PRESENTATION

LEGEND = "  ".join(f"{shown.symbol} {status.value}" for status, shown in PRESENTATION.items()) + "  · no cell"


def mark(status: Status) -> str:
    """A table cell's text: the status's symbol, and its name in capitals when it fails the gate (``✗ FAIL``)."""
    symbol = PRESENTATION[status].symbol
    return f"{symbol} {status.value.upper()}" if status.gates(strict=False) else symbol


def style(status: Status) -> str:
    """The status's colour on a terminal."""
    return PRESENTATION[status].style


def render(matrix: Matrix, *, color: bool = False, width: int = 120, by_owner: bool = False, verbosity: int = 0,
           owner: str | None = None) -> str:
    """The failures grouped by cause (``owner``'s causes first), the table (one per owner with ``by_owner``) and
    the verdict, as text (ANSI colours when ``color``). ``verbosity`` -1 leaves out the table; 1 also spells out
    every cell that is neither a pass nor a failure (skips, unsupported, waived, xpass) with its reason."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False)
    shown = SHOWN + (NOTED if verbosity > 0 else ())
    found = causes.grouped(matrix, owner, shown)
    for tier, numbered in causes.tiers(found):
        console.print(Text(causes.tier_heading(tier, found), style="bold"), soft_wrap=True)
        for number, cause in numbered:
            status = cause.members[0].cell.status
            console.print(Text(printable(f"[{number}] {cause.title}"), style=f"bold {style(status)}"), soft_wrap=True)
            for shown_status, line in causes.lines(cause, registry_of(matrix)):
                console.print(Text(printable(f"    {line}"), style=style(shown_status)), soft_wrap=True)
    for line in patch_lines(matrix):
        console.print(Text(printable(line), style="bold yellow"), soft_wrap=True)
    if verbosity >= 0:
        for title, narrowed in owner_groups(matrix) if by_owner else [("validation matrix", matrix)]:
            for shown_part in _parts(narrowed, title, width):
                console.print(shown_part, soft_wrap=isinstance(shown_part, Text))
        console.print(Text(LEGEND, style="dim"), soft_wrap=True)
        renamed = [f"{short(n)}={n}" for n in columns(matrix) if short(n) != n]
        if renamed:
            console.print(Text("columns: " + " ".join(renamed), style="dim"), soft_wrap=True)
    verdict_style = "bold green" if matrix.verdict == "pass" else "bold red"
    console.print(Text(headline(matrix), style=verdict_style), soft_wrap=True)
    return buffer.getvalue()


#: What ``-v`` adds to the failures: every cell with a reason worth reading.
NOTED = (Status.SKIP, Status.UNSUPPORTED, Status.WAIVED, Status.XPASS)


def _parts(matrix: Matrix, title: str, width: int) -> list:
    """What shows ``matrix`` in ``width`` columns: its tables (one per group of columns that fits), or one line
    per row where not even one column fits beside the names; then a line per collapsed set of skipped rows."""
    names = columns(matrix)
    shown, collapsed = _collapse(matrix)
    label = max([len("entry")] + [len(printable(row_label(e, d))) for e, d in shown])
    widths = {n: max([len(short(n))] + [len(mark(s)) for e, d in shown if (s := _status(e, n, d))]) for n in names}
    groups = _fit(names, widths, label, width)
    parts: list = []
    if shown and groups is None:
        parts = [Text(f"{printable(row_label(e, d))}: " + ", ".join(
            f"{short(n)} {mark(s)}" for n in names if (s := _status(e, n, d)))) for e, d in shown]
    elif shown and groups:
        parts = [_table(shown, group_names, title if len(groups) == 1 else f"{title} ({i}/{len(groups)})")
                 for i, group_names in enumerate(groups, 1)]
    return parts + [Text(printable(line), style=style(Status.SKIP)) for line in collapsed]


def _fit(names: list[str], widths: dict, label: int, width: int) -> list[list[str]] | None:
    """``names`` in groups whose table fits ``width`` (each column its width plus a border, the entry column
    repeated in each); None when one column alone does not fit beside the entry column."""
    room = width - label - 2  # the left border, the entry column, its right border
    groups: list[list[str]] = [[]]
    used = 0
    for name in names:
        need = widths[name] + 1
        if need > room:
            return None
        if used + need > room:
            groups.append([])
            used = 0
        groups[-1].append(name)
        used += need
    return groups


def _collapse(matrix: Matrix) -> tuple[list, list[str]]:
    """The rows to show, and a line for each set of two or more rows whose every cell is a skip for one same
    reason, on one device (the CUDA rows of a machine without a GPU), in place of those rows."""
    reasons: dict[tuple, list] = {}
    for entry, device in rows(matrix):
        cells = [c for c in entry.cells if device in (None, c.device)]
        messages = {c.message for c in cells}
        if cells and all(c.status is Status.SKIP for c in cells) and len(messages) == 1:
            reasons.setdefault((device, messages.pop()), []).append((entry, device))
    folded = {(id(e), d) for found in reasons.values() if len(found) > 1 for e, d in found}
    lines = [f"{device + ': ' if device else ''}{len(found)} entries skipped: {message}"
             for (device, message), found in reasons.items() if len(found) > 1]
    return [(e, d) for e, d in rows(matrix) if (id(e), d) not in folded], lines


def _status(entry, name: str, device) -> Status | None:
    return worst(group(entry, name, device))


def _table(shown: list, names: list[str], title: str) -> Table:
    table = Table(title=title, show_lines=False, padding=(0, 0), collapse_padding=True, min_width=len(title) + 4)
    table.add_column("entry", no_wrap=True)
    for name in names:
        table.add_column(short(name), justify="center", no_wrap=True)
    for entry, device in shown:
        table.add_row(Text(printable(row_label(entry, device))), *[_cell(group(entry, n, device)) for n in names])
    return table


def _cell(cells: list[Cell]) -> Text:
    status = worst(cells)
    if status is None:
        return Text("·", style="dim")
    return Text(mark(status), style=style(status))

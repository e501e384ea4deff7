"""The matrix as a rich table for a terminal, followed by the failures; returned as text."""

from __future__ import annotations

import io

from rich.console import Console
from rich.table import Table
from rich.text import Text

from audit.contract import Status
from audit.results.cells import Cell
from audit.results.matrix import Matrix
from audit.reporters.common import (SHOWN, also_lines, columns, failure_line, group, headline, owner_groups, printable,
                                    problems, registry_of, row_label, rows, short, worst)

SYMBOL = {"pass": "✓", "fail": "✗ FAIL", "error": "! ERROR", "unsupported": "–", "waived": "w", "xpass": "+",
          "skip": "s"}
LEGEND = "✓ pass  ✗ fail  ! error  – unsupported  w waived  + xpass  s skip  · no cell"
STYLE = {"pass": "green", "fail": "bold red", "error": "bold magenta", "unsupported": "dim",
         "waived": "yellow", "xpass": "cyan", "skip": "blue"}


def render(matrix: Matrix, *, color: bool = False, width: int = 120, by_owner: bool = False, verbosity: int = 0) -> str:
    """The table (one per owner with ``by_owner``), the failures and the verdict, as text (ANSI colours
    when ``color``). ``verbosity`` -1 leaves out the table; 1 also spells out every cell that is neither a
    pass nor a failure (skips, unsupported, waived, xpass) with its reason."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=color, no_color=not color, width=width, highlight=False)
    if verbosity >= 0:
        for title, narrowed in owner_groups(matrix) if by_owner else [("validation matrix", matrix)]:
            console.print(_table(narrowed, title))
        console.print(Text(LEGEND, style="dim"))
        renamed = [f"{short(n)}={n}" for n in columns(matrix) if short(n) != n]
        if renamed:
            console.print(Text("columns: " + " ".join(renamed), style="dim"))
    shown = SHOWN + (NOTED if verbosity > 0 else ())
    for entry, cell in problems(matrix, shown):
        for line in [failure_line(entry, cell, registry_of(matrix))] + [f"  {a}" for a in also_lines(cell)]:
            console.print(Text(printable(line), style=STYLE[cell.status.value]), soft_wrap=True)
    verdict_style = "bold green" if matrix.verdict == "pass" else "bold red"
    console.print(Text(headline(matrix), style=verdict_style))
    return buffer.getvalue()


#: What ``-v`` adds to the failures: every cell with a reason worth reading.
NOTED = (Status.SKIP, Status.UNSUPPORTED, Status.WAIVED, Status.XPASS)


def _table(matrix: Matrix, title: str) -> Table:
    names = columns(matrix)
    table = Table(title=title, show_lines=False, padding=(0, 0), collapse_padding=True, min_width=len(title) + 4)
    table.add_column("entry", no_wrap=True)
    for name in names:
        table.add_column(short(name), justify="center", no_wrap=True)
    for entry, device in rows(matrix):
        table.add_row(Text(printable(row_label(entry, device))), *[_cell(group(entry, n, device)) for n in names])
    return table


def _cell(cells: list[Cell]) -> Text:
    status = worst(cells)
    if status is None:
        return Text("·", style="dim")
    return Text(SYMBOL[status.value], style=STYLE[status.value])

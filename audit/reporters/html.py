"""The matrix as one self-contained HTML file: no network, no external assets, every string escaped.

A verdict banner, the failures first (what, where, who owns it, how to replay it), then the entries ×
checks grid (colour-coded, filterable by owner and status; a click shows a cell's message, shrunk input
and replay command), the time spent per check, and the environment. It reads without JavaScript: the
script only filters and shows details.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from html import escape
from importlib import resources

from audit.core.contract import Status
from audit.reporters import causes
from audit.reporters.common import (columns, further_failures, group, headline, owner_groups, row_label, rows, short,
                                    worst)
from audit.reporters.statuses import FILTERS, PRESENTATION, symbol
from audit.results.causes import Cause, Member
from audit.results.cells import CellFailure
from audit.results.matrix import Matrix


def render(matrix: Matrix, *, by_owner: bool = False, owner: str | None = None) -> str:
    """The HTML text of ``matrix``; ``owner``: that owner's causes first."""
    verdict = "?" if matrix.verdict is None else matrix.verdict
    cells = [dict(c.to_json(), entry=e.name, owner=list(e.owners), line=e.line) for e, c in matrix.pairs()]
    body = [
        f'<header class="banner {escape(verdict)}"><h1>{escape(headline(matrix))}</h1>',
        f"<p>{_counts(matrix)}</p></header>",
        _failures(matrix, owner) + _inconclusive(matrix),
        _controls(matrix),
        _grids(matrix, cells, by_owner),
        '<section id="detail" class="detail" hidden></section>',
        _times(matrix),
        _environment(matrix),
    ]
    data = json.dumps(cells, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return TEMPLATE.format(title=escape(headline(matrix)), style=asset("report.css"), body="\n".join(body),
                           data=data, script=asset("report.js"))


def _counts(matrix: Matrix) -> str:
    """The banner's chips, claimed cells apart from unclaimed probes as the headline counts them (one chip row
    each): a chip never adds an unclaimed error to the claimed ones that gate."""
    cells = matrix.cells()
    rows = []
    for label, chosen in (("claimed", [c for c in cells if c.claimed]),
                          ("unclaimed probes (do not gate)", [c for c in cells if not c.claimed])):
        found = Counter(c.status for c in chosen)
        chips = " ".join(f'<span class="chip s-{escape(s.value)}">{symbol(s.value)} {found[s]} {escape(s.value)}</span>'
                         for s in Status if found[s])
        if chips:
            rows.append(f'<span class="chips">{escape(label)}: {chips}</span>')
    return "<br>".join(rows) or "no cells"


def _failures(matrix: Matrix, owner: str | None) -> str:
    """The failures grouped by cause, a heading per tier: each cause open, its first cells listed (the smallest
    first) and the rest folded away."""
    found = causes.grouped(matrix, owner)
    if not found:
        return ('<section class="failures"><h2>Failures</h2><p class="none">None: every gating cell passed.</p>'
                '</section>')
    parts = []
    for tier, numbered in causes.tiers(found):
        parts.append(f'<h3 class="tier">{escape(causes.tier_heading(tier, found))}</h3>')
        parts += [_cause(number, cause) for number, cause in numbered]
    cells = sum(len(c.members) for c in found)
    return (f'<section class="failures"><h2>Failures: {len(found)} cause{"s" * (len(found) != 1)}, {cells} '
            f'cell{"s" * (cells != 1)}</h2>{"".join(parts)}</section>')


def _cause(number: int, cause: Cause) -> str:
    """One cause, open: its line, its cells and owners, the likely fix, the smallest case and its replay, then its
    cells, each folded to its one line (a screen shows several causes)."""
    shown, hidden = causes.listed(cause)
    status = escape(shown[0].cell.status.value)
    fix = f'<p class="fix">Likely fix: {escape(cause.fix)}</p>' if cause.fix else ""
    rest = [m for m in cause.members if all(m is not s for s in shown)]
    folded = (f'<details class="more"><summary>{hidden} more cell{"s" * (hidden != 1)}</summary>'
              f'{"".join(_member(m) for m in rest)}</details>') if hidden else ""
    small = cause.smallest
    return (f'<details class="cause s-{status}" open><summary><span class="tag">{status}</span> '
            f'<b>{number}. {escape(cause.title)}</b></summary>'
            f'<p class="counts">{escape(causes.summary(cause))}</p>{fix}'
            f'<p class="message">Smallest failing case: <b>{escape(small.entry.name)}</b> ({escape(small.cell.dtype)}, '
            f'{escape(small.cell.device)}): {escape(small.cell.message)}</p>'
            f'<p>Replay it: <code class="repro">{escape(small.cell.repro)}</code></p>'
            f'{"".join(_member(m) for m in shown)}{folded}</details>')


def _member(member: Member) -> str:
    """One failing cell of a cause, folded to its line: what, where, by how much, who owns it, its replay and
    shrunk input."""
    entry, cell = member.entry, member.cell
    case = json.dumps(cell.case, indent=1) if cell.case else ""
    line = f" · registry line {entry.line}" if entry.line else ""
    return (f'<details class="failure s-{escape(cell.status.value)}"><summary>'
            f'<b>{escape(entry.name)}</b> {escape(cell.check)} '
            f'<span class="tag">{escape(cell.status.value)}</span> ({escape(cell.dtype)}, {escape(cell.device)}) '
            f'· owner {escape(", ".join(entry.owners))}{line}</summary><p class="message">{escape(cell.message)}</p>'
            f'<p>Replay: <code class="repro">{escape(cell.repro)}</code></p>'
            + (f"<details><summary>Shrunk input</summary><pre>{escape(case)}</pre></details>" if case else "")
            + "".join(_further(f) for f in further_failures(cell)) + "</details>")


def _inconclusive(matrix: Matrix) -> str:
    """The cells where a reference was undefined (NaN or inf where the target was finite): there the target was
    judged without it, by finite differences (``metrics.reference_undefined``). Nothing when there are none."""
    items = [f"<li><b>{escape(entry.name)}</b> {escape(cell.check)} ({escape(cell.dtype)}, {escape(cell.device)}), "
             f"{note.get('examples', 0)} example(s): {escape(str(note.get('first', '')))}</li>"
             for entry, cell in matrix.pairs() if (note := (cell.metrics or {}).get("reference_undefined"))]
    if not items:
        return ""
    return (f'<section class="inconclusive"><h2>Reference undefined ({len(items)})</h2><p>Where the reference '
            f"was NaN or inf and the target finite, the target was judged by finite differences instead:</p>"
            f'<ul>{"".join(items)}</ul></section>')


def _further(failure: CellFailure) -> str:
    """A further failure of a cell, under its first: what it said and its own replay command."""
    replay = f'<p>Replay: <code class="repro">{escape(failure.repro)}</code></p>' if failure.repro else ""
    return f'<p class="message">Also: {escape(failure.message)}</p>{replay}'


def _controls(matrix: Matrix) -> str:
    owners = sorted({o for e in matrix.entries for o in e.owners})
    options = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in owners)
    boxes = "".join(f'<label class="chip s-{s.value}" title="{escape(PRESENTATION[s].meaning)}"><input '
                    f'type="checkbox" value="{s.value}" checked> {PRESENTATION[s].symbol} {s.value}</label>'
                    for s in FILTERS)
    return (f'<h2>Matrix</h2><section class="controls"><label>Owner <select id="owner"><option value="">all owners'
            f'</option>{options}</select></label> <span class="statuses">{boxes}</span>'
            f'<span class="hint">Click a cell for its message, shrunk input and replay command.</span></section>')


def _grids(matrix: Matrix, cells: list, by_owner: bool) -> str:
    groups = owner_groups(matrix) if by_owner else [("", matrix)]
    return "".join((f"<h2>{escape(owner)}</h2>" if owner else "") + _grid(narrowed, cells)
                   for owner, narrowed in groups)


def _grid(matrix: Matrix, cells: list) -> str:
    names = columns(matrix)
    head = "".join(f'<th title="{escape(n)}"><span>{escape(short(n))}</span></th>' for n in names)
    index = {(c["entry"], c["check"], c["dtype"], c["device"]): i for i, c in enumerate(cells)}
    body = []
    for entry, device in rows(matrix):
        tds = []
        for name in names:
            members = group(entry, name, device)
            status = worst(members)
            if status is None:
                tds.append('<td class="empty">·</td>')
                continue
            ids = ",".join(str(index[(entry.name, c.check, c.dtype, c.device)]) for c in members)
            tip = "; ".join(f"{c.dtype}, {c.device}: {c.status.value}" for c in members)
            statuses = " ".join(sorted({c.status.value for c in members}))
            tds.append(f'<td class="cell s-{status.value}" data-cells="{ids}" data-statuses="{statuses}" '
                       f'title="{escape(name)}: {escape(tip)}" tabindex="0">{PRESENTATION[status].symbol}</td>')
        owners = ", ".join(entry.owners)
        body.append(f'<tr data-owners="{escape(json.dumps(list(entry.owners)))}"><th class="name">'
                    f'{escape(row_label(entry, device))}</th><td class="owner">{escape(owners)}</td>'
                    f'{"".join(tds)}</tr>')
    return (f'<table class="grid"><thead><tr><th>entry</th><th>owner</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _times(matrix: Matrix) -> str:
    totals: dict[str, float] = {}
    for cell in matrix.cells():
        totals[cell.check] = totals.get(cell.check, 0.0) + cell.seconds
    if not totals:
        return ""
    biggest = max(totals.values()) or 1.0
    rows_ = "".join(f'<tr><th>{escape(name)}</th><td class="num">{seconds:.2f} s</td><td class="bar">'
                    f'<span style="width:{100 * seconds / biggest:.1f}%"></span></td></tr>'
                    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]))
    return f'<section><h2>Time per check</h2><table class="times">{rows_}</table></section>'


def _environment(matrix: Matrix) -> str:
    env = matrix.environment or {}
    rows_ = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(_text(v))}</td></tr>" for k, v in sorted(env.items()))
    extra = [("registry", matrix.registry), ("created", matrix.created)]
    rows_ += "".join(f"<tr><th>{k}</th><td>{escape(_text(v))}</td></tr>" for k, v in extra if v)
    return f'<section><h2>Environment</h2><table class="env">{rows_}</table></section>'


def _text(value) -> str:
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return "none" if value is None else str(value)


TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
{style}</style>
</head>
<body>
{body}
<script type="application/json" id="cells">{data}</script>
<script>
{script}</script>
</body>
</html>
"""


@functools.cache
def asset(name: str) -> str:
    """The text of the package data file ``assets/name`` (the report's style sheet and script), read once."""
    return resources.files("audit.reporters").joinpath("assets").joinpath(name).read_text(encoding="utf-8")

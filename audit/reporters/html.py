"""The matrix as one self-contained HTML file: no network, no external assets, every string escaped.

A verdict banner, the failures first (what, where, who owns it, how to replay it), then the entries ×
checks grid (colour-coded, filterable by owner and status; a click shows a cell's message, shrunk input
and replay command), the time spent per check, and the environment. It reads without JavaScript: the
script only filters and shows details.
"""

from __future__ import annotations

import json
from html import escape

from audit.reporters.common import (columns, further_failures, group, headline, owner_groups, problems, row_label, rows,
                                    short, worst)

SYMBOL = {"pass": "✓", "fail": "✗", "error": "!", "unsupported": "–", "waived": "w", "xpass": "+", "skip": "s"}
MEANING = {"pass": "held on every example", "fail": "a claimed property was violated",
           "error": "the audit could not decide", "unsupported": "not claimed, does not hold",
           "waived": "fails, covered by a waiver", "xpass": "holds though not claimed", "skip": "not run here"}
ORDER = ("fail", "error", "xpass", "skip", "waived", "unsupported", "pass")


def render(matrix: dict, *, by_owner: bool = False) -> str:
    """The HTML text of ``matrix``."""
    verdict = matrix.get("verdict", "?")
    cells = [dict(c, entry=e["name"], owner=e.get("owner", []), line=e.get("line")) for e in matrix["entries"]
             for c in e["cells"]]
    body = [
        f'<header class="banner {escape(verdict)}"><h1>{escape(headline(matrix))}</h1>',
        f"<p>{_counts(matrix)}</p></header>",
        _failures(matrix),
        _controls(matrix),
        _grids(matrix, cells, by_owner),
        '<section id="detail" class="detail" hidden></section>',
        _times(matrix),
        _environment(matrix),
    ]
    data = json.dumps(cells, sort_keys=True).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return TEMPLATE.format(title=escape(headline(matrix)), style=STYLE, body="\n".join(body), data=data,
                           script=SCRIPT)


def _counts(matrix: dict) -> str:
    parts = [f'<span class="chip s-{escape(s)}">{SYMBOL.get(s, "?")} {n} {escape(s)}</span>'
             for s, n in matrix.get("summary", {}).items() if n]
    return " ".join(parts) or "no cells"


def _failures(matrix: dict) -> str:
    found = problems(matrix)
    if not found:
        return '<section class="failures"><h2>Failures</h2><p class="none">None: every gating cell passed.</p></section>'
    items = []
    for entry, cell in found:
        case = json.dumps(cell["case"], indent=1) if cell.get("case") else ""
        line = f" · registry line {entry['line']}" if entry.get("line") else ""
        items.append(
            f'<details class="failure s-{escape(cell["status"])}" open><summary>'
            f'<b>{escape(entry["name"])}</b> {escape(cell["check"])} '
            f'<span class="tag">{escape(cell["status"])}</span> ({escape(cell["dtype"])}, {escape(cell["device"])}) '
            f'· owner {escape(", ".join(entry["owner"]))}{line}</summary><p class="message">{escape(cell["message"])}</p>'
            f'<p>Replay: <code class="repro">{escape(cell["repro"])}</code></p>'
            + (f"<details><summary>Shrunk input</summary><pre>{escape(case)}</pre></details>" if case else "")
            + "".join(_further(f) for f in further_failures(cell)) + "</details>")
    return f'<section class="failures"><h2>Failures ({len(found)})</h2>{"".join(items)}</section>'


def _further(failure: dict) -> str:
    """A further failure of a cell, under its first: what it said and its own replay command."""
    replay = f'<p>Replay: <code class="repro">{escape(failure["repro"])}</code></p>' if failure.get("repro") else ""
    return f'<p class="message">Also: {escape(failure["message"])}</p>{replay}'


def _controls(matrix: dict) -> str:
    owners = sorted({o for e in matrix["entries"] for o in e.get("owner", [])})
    options = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in owners)
    boxes = "".join(f'<label class="chip s-{s}" title="{escape(MEANING[s])}"><input type="checkbox" value="{s}" '
                    f'checked> {SYMBOL[s]} {s}</label>' for s in ORDER)
    return (f'<h2>Matrix</h2><section class="controls"><label>Owner <select id="owner"><option value="">all owners'
            f'</option>{options}</select></label> <span class="statuses">{boxes}</span>'
            f'<span class="hint">Click a cell for its message, shrunk input and replay command.</span></section>')


def _grids(matrix: dict, cells: list, by_owner: bool) -> str:
    groups = owner_groups(matrix) if by_owner else [("", matrix)]
    return "".join((f"<h2>{escape(owner)}</h2>" if owner else "") + _grid(narrowed, cells)
                   for owner, narrowed in groups)


def _grid(matrix: dict, cells: list) -> str:
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
            ids = ",".join(str(index[(entry["name"], c["check"], c["dtype"], c["device"])]) for c in members)
            tip = "; ".join(f"{c['dtype']}, {c['device']}: {c['status']}" for c in members)
            statuses = " ".join(sorted({c["status"] for c in members}))
            tds.append(f'<td class="cell s-{status.value}" data-cells="{ids}" data-statuses="{statuses}" '
                       f'title="{escape(name)}: {escape(tip)}" tabindex="0">{SYMBOL[status.value]}</td>')
        owners = ", ".join(entry.get("owner", []))
        body.append(f'<tr data-owners="{escape(json.dumps(entry.get("owner", [])))}"><th class="name">'
                    f'{escape(row_label(entry, device))}</th><td class="owner">{escape(owners)}</td>{"".join(tds)}</tr>')
    return (f'<table class="grid"><thead><tr><th>entry</th><th>owner</th>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _times(matrix: dict) -> str:
    totals: dict[str, float] = {}
    for entry in matrix["entries"]:
        for cell in entry["cells"]:
            totals[cell["check"]] = totals.get(cell["check"], 0.0) + cell.get("seconds", 0.0)
    if not totals:
        return ""
    biggest = max(totals.values()) or 1.0
    rows_ = "".join(f'<tr><th>{escape(name)}</th><td class="num">{seconds:.2f} s</td><td class="bar">'
                    f'<span style="width:{100 * seconds / biggest:.1f}%"></span></td></tr>'
                    for name, seconds in sorted(totals.items(), key=lambda kv: -kv[1]))
    return f'<section><h2>Time per check</h2><table class="times">{rows_}</table></section>'


def _environment(matrix: dict) -> str:
    env = matrix.get("environment", {})
    rows_ = "".join(f"<tr><th>{escape(str(k))}</th><td>{escape(_text(v))}</td></tr>" for k, v in sorted(env.items()))
    extra = [("registry", matrix.get("registry")), ("created", matrix.get("created"))]
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
<style>{style}</style>
</head>
<body>
{body}
<script type="application/json" id="cells">{data}</script>
<script>{script}</script>
</body>
</html>
"""

STYLE = """
:root { --pass:#1a7f37; --fail:#cf222e; --error:#8250df; --unsupported:#8c959f; --waived:#bf8700;
        --xpass:#0969da; --skip:#57606a; --bg:#ffffff; --fg:#1f2328; --line:#d0d7de; --soft:#f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: var(--fg);
       background: var(--bg); margin: 0 auto; padding: 0 24px 48px; max-width: 1500px; }
h1 { font-size: 22px; margin: 0 0 6px; } h2 { font-size: 17px; margin: 28px 0 10px; }
.banner { margin: 0 -24px 16px; padding: 18px 24px; color: #fff; }
.banner.pass { background: var(--pass); } .banner.fail { background: var(--fail); }
.banner .chip { background: rgba(255,255,255,.92); }
.chip { display: inline-block; padding: 1px 8px; border-radius: 10px; margin: 2px 2px 2px 0; font-size: 12px;
        border: 1px solid var(--line); background: var(--soft); color: var(--fg); white-space: nowrap; }
.chip.s-pass { color: var(--pass); } .chip.s-fail { color: var(--fail); } .chip.s-error { color: var(--error); }
.chip.s-xpass { color: var(--xpass); } .chip.s-waived { color: var(--waived); } .chip.s-skip { color: var(--skip); }
.failure { border: 1px solid var(--line); border-left: 4px solid var(--fail); border-radius: 6px; padding: 8px 12px;
           margin: 8px 0; background: #fff; }
.failure.s-error { border-left-color: var(--error); }
.failure > summary { cursor: pointer; }
.tag { text-transform: uppercase; font-size: 11px; font-weight: 700; color: var(--fail); }
.s-error .tag { color: var(--error); }
.message { white-space: pre-wrap; word-break: break-word; margin: 8px 0; }
code, pre { font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
code.repro { background: var(--soft); padding: 2px 6px; border-radius: 4px; user-select: all; }
pre { background: var(--soft); padding: 8px; border-radius: 6px; overflow: auto; max-height: 320px; }
.none { color: var(--pass); }
.controls { margin: 18px 0 8px; display: flex; gap: 12px; flex-wrap: wrap; align-items: center; }
.controls select { font: inherit; padding: 2px 4px; }
.controls label.chip { cursor: pointer; }
.hint { color: var(--skip); font-size: 12px; }
table { border-collapse: collapse; }
.grid th, .grid td { border: 1px solid var(--line); padding: 3px 6px; text-align: center; }
.grid thead th { background: var(--soft); font-weight: 600; font-size: 12px; position: sticky; top: 0; }
.grid th.name { text-align: left; font-weight: 600; white-space: nowrap; }
.grid td.owner { text-align: left; color: var(--skip); font-size: 12px; white-space: nowrap; }
.grid td.cell { cursor: pointer; font-weight: 700; color: #fff; min-width: 30px; }
.grid td.cell:focus, .grid td.cell.chosen { outline: 3px solid #ffd33d; outline-offset: -3px; }
.grid td.empty { color: var(--line); }
.grid td.dim { opacity: .12; }
td.s-pass { background: var(--pass); } td.s-fail { background: var(--fail); } td.s-error { background: var(--error); }
td.s-unsupported { background: #d8dee4; color: #57606a !important; } td.s-waived { background: var(--waived); }
td.s-xpass { background: var(--xpass); } td.s-skip { background: #afb8c1; }
.detail { border: 1px solid var(--line); border-radius: 6px; padding: 10px 14px; margin: 12px 0; background: var(--soft); }
.detail h3 { margin: 0 0 6px; font-size: 15px; }
.detail .one { border-top: 1px solid var(--line); padding-top: 6px; margin-top: 6px; }
.times th { text-align: left; padding: 2px 10px 2px 0; font-weight: 500; }
.times td.num { text-align: right; padding-right: 10px; font-variant-numeric: tabular-nums; }
.times td.bar { width: 320px; } .times td.bar span { display: block; height: 10px; background: var(--xpass); border-radius: 2px; }
.env th { text-align: left; padding: 2px 12px 2px 0; font-weight: 500; color: var(--skip); }
.env td { font-family: ui-monospace, Menlo, monospace; font-size: 12px; word-break: break-all; }
"""

SCRIPT = """
(function () {
  var cells = JSON.parse(document.getElementById('cells').textContent);
  var detail = document.getElementById('detail');
  function text(tag, value, cls) { var e = document.createElement(tag); e.textContent = value; if (cls) e.className = cls; return e; }
  function show(td) {
    document.querySelectorAll('td.chosen').forEach(function (x) { x.classList.remove('chosen'); });
    td.classList.add('chosen');
    detail.replaceChildren();
    td.dataset.cells.split(',').forEach(function (i) {
      var c = cells[+i], box = document.createElement('div');
      box.className = 'one';
      box.appendChild(text('h3', c.entry + ' · ' + c.check + ' (' + c.dtype + ', ' + c.device + '): ' + c.status));
      box.appendChild(text('p', 'owner ' + c.owner.join(', ') + (c.claimed ? ' · claimed' : ' · not claimed') +
                                ' · ' + c.examples + ' examples · ' + c.seconds + ' s'));
      if (c.message) box.appendChild(text('p', c.message, 'message'));
      if (c.repro) { var p = text('p', 'Replay: '); p.appendChild(text('code', c.repro, 'repro')); box.appendChild(p); }
      if (c.case) box.appendChild(text('pre', JSON.stringify(c.case, null, 1)));
      if (c.metrics) box.appendChild(text('pre', JSON.stringify(c.metrics, null, 1)));
      detail.appendChild(box);
    });
    detail.hidden = false;
  }
  document.querySelectorAll('td.cell').forEach(function (td) {
    td.addEventListener('click', function () { show(td); });
    td.addEventListener('keydown', function (e) { if (e.key === 'Enter') show(td); });
  });
  function filter() {
    var owner = document.getElementById('owner').value;
    var wanted = {};
    document.querySelectorAll('.statuses input').forEach(function (b) { wanted[b.value] = b.checked; });
    document.querySelectorAll('.grid tbody tr').forEach(function (tr) {
      tr.hidden = owner !== '' && JSON.parse(tr.dataset.owners).indexOf(owner) < 0;
      tr.querySelectorAll('td.cell').forEach(function (td) {
        var any = td.dataset.statuses.split(' ').some(function (s) { return wanted[s]; });
        td.classList.toggle('dim', !any);
      });
    });
  }
  document.getElementById('owner').addEventListener('change', filter);
  document.querySelectorAll('.statuses input').forEach(function (b) { b.addEventListener('change', filter); });
})();
"""

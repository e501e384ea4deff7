"""``audit mutate``'s reports as text: the terminal's, Markdown's (for a job summary or a PR comment) and a
self-contained HTML page (the matrix report's style sheet, every string escaped). Each returns a string; nothing
here prints."""

from __future__ import annotations

from html import escape

from audit.mutate.results import EQUIVALENT, ERRORED, FATES, SURVIVED, MutationRun


def _rate(rate: float | None) -> str:
    return "n/a" if rate is None else f"{rate:.0%}"


def _verdict(run: MutationRun) -> str:
    counts = run.counts
    line = (f"{sum(counts.values())} mutants: {counts['killed']} killed, {counts['survived']} survived, "
            f"{counts['equivalent']} equivalent, {counts['errored']} errored; kill rate {_rate(run.kill_rate)}")
    if run.min_kill_rate is None:
        return line
    below = run.below()
    gate = (f"FAIL: {len(below)} entr{'y' if len(below) == 1 else 'ies'} under --min-kill-rate "
            f"{run.min_kill_rate:.0%} ({', '.join(e.name for e in below)})" if below
            else f"PASS: every entry at or above --min-kill-rate {run.min_kill_rate:.0%}")
    return f"{line}\n{gate}"


def text(run: MutationRun, verbose: bool = False) -> str:
    """The terminal report: one line per entry, each survivor with its diff, the checks it passed and the
    suggestion; the first-kill table; the verdict."""
    lines = []
    for entry in run.entries:
        counts = entry.counts
        lines.append(f"{entry.name} ({', '.join(entry.owners)}): kill rate {_rate(entry.kill_rate)}  "
                     + "  ".join(f"{counts[f]} {f}" for f in FATES))
        for note in entry.notes:
            lines.append(f"  note: {note}")
        for mutant in entry.mutants:
            if mutant.fate == SURVIVED or (verbose and mutant.fate in (EQUIVALENT, ERRORED)):
                lines += _mutant_lines(mutant, "  ")
    if run.first_kills:
        lines.append("first kills by check: " + ", ".join(f"{check} {n}" for check, n in run.first_kills.items()))
    lines.append(_verdict(run))
    return "\n".join(lines) + "\n"


def _mutant_lines(mutant, indent: str) -> list[str]:
    lines = [f"{indent}{mutant.fate} m{mutant.number} {mutant.function} [{mutant.operator}] {mutant.diff}"]
    if mutant.fate == SURVIVED:
        lines.append(f"{indent}  passed: {', '.join(mutant.passed)}")
        lines.append(f"{indent}  suggestion: {mutant.suggestion}")
    elif mutant.reason:
        lines.append(f"{indent}  {mutant.reason}")
    return lines


def markdown(run: MutationRun) -> str:
    """The Markdown report: a table of entries, then each survivor, then the first-kill table and the verdict."""
    lines = ["# Mutation testing", "", _verdict(run).replace("\n", "  \n"), "",
             "| entry | owners | kill rate | " + " | ".join(FATES) + " |",
             "|---|---|---|" + "---|" * len(FATES)]
    for entry in run.entries:
        counts = entry.counts
        lines.append(f"| {entry.name} | {', '.join(entry.owners)} | {_rate(entry.kill_rate)} | "
                     + " | ".join(str(counts[f]) for f in FATES) + " |")
    survivors = [(e, m) for e in run.entries for m in e.mutants if m.fate == SURVIVED]
    if survivors:
        lines += ["", "## Survivors", ""]
        for entry, m in survivors:
            lines += [f"- **{entry.name}** m{m.number} `{m.function}` ({m.operator}): `{m.diff}`",
                      f"  - passed: {', '.join(m.passed)}", f"  - suggestion: {m.suggestion}"]
    noted = [e for e in run.entries if e.notes]
    if noted:
        lines += ["", "## Notes", ""] + [f"- **{e.name}**: {note}" for e in noted for note in e.notes]
    if run.first_kills:
        lines += ["", "## First kills by check", "", "| check | mutants killed first |", "|---|---|"]
        lines += [f"| {check} | {n} |" for check, n in run.first_kills.items()]
    return "\n".join(lines) + "\n"



def html(run: MutationRun) -> str:
    """The HTML page: the verdict, a table of entries, each survivor with its diff and suggestion, the notes and
    the first-kill table."""
    from audit.reporters.html import asset

    verdict = "fail" if run.below() else "pass"
    rows = "".join(f"<tr><td>{escape(e.name)}</td><td>{escape(', '.join(e.owners))}</td>"
                   f"<td>{_rate(e.kill_rate)}</td>" + "".join(f"<td>{e.counts[f]}</td>" for f in FATES) + "</tr>"
                   for e in run.entries)
    head = "".join(f"<th>{f}</th>" for f in ("entry", "owners", "kill rate", *FATES))
    survivors = "".join(
        f'<details class="failure s-fail"><summary><b>{escape(e.name)}</b> m{m.number} '
        f"<code>{escape(m.function)}</code> ({escape(m.operator)})</summary>"
        f'<p><code class="repro">{escape(m.diff)}</code></p><p>Passed: {escape(", ".join(m.passed))}</p>'
        f'<p class="fix">Suggestion: {escape(m.suggestion)}</p></details>'
        for e in run.entries for m in e.mutants if m.fate == SURVIVED)
    notes = "".join(f"<li><b>{escape(e.name)}</b>: {escape(n)}</li>" for e in run.entries for n in e.notes)
    kills = "".join(f"<tr><td>{escape(c)}</td><td>{n}</td></tr>" for c, n in run.first_kills.items())
    headline, *gate = _verdict(run).splitlines()
    body = (f'<header class="banner {verdict}"><h1>{escape(headline)}</h1>'
            + "".join(f"<p>{escape(line)}</p>" for line in gate) + "</header>"
            f"<h2>Entries</h2><table><tr>{head}</tr>{rows}</table>"
            + (f"<h2>Survivors</h2>{survivors}" if survivors else "")
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "")
            + (f"<h2>First kills by check</h2><table><tr><th>check</th><th>mutants killed first</th></tr>{kills}"
               "</table>" if kills else ""))
    return PAGE.format(style=asset("report.css"), body=body)


PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Mutation testing</title>
<style>
{style}</style>
</head>
<body>
{body}
</body>
</html>
"""

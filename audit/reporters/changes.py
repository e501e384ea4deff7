"""A :class:`~audit.results.changes.Diff` as text for a terminal or as Markdown, read from the top: the verdict,
what changed underneath, regressions grouped by cause (each with its owners), then the rest."""

from __future__ import annotations

from audit.behaviour.compare import BehaviourDiff
from audit.reporters import behaviour as behaviour_report
from audit.reporters.common import markdown_text
from audit.results.changes import CLASSES, TITLES, CellChange, ChangeCause, Diff, by_cause

#: What a diff without behaviour records compares: verdicts alone.
NO_BEHAVIOUR = BehaviourDiff(note="behaviour not compared")


def headline(d: Diff, b: BehaviourDiff = NO_BEHAVIOUR) -> str:
    """One line: the verdict, the count of each class of status change present, and of behaviour changes."""
    counts = ", ".join(f"{len(d.of(kind))} {kind.replace('_', ' ')}" for kind in CLASSES if d.of(kind))
    verdict = "REGRESSION" if d.regressed else "REGRESSION of behaviour" if b.regressed else "no regression"
    moved = behaviour_report.counts(b)
    text = f"audit diff: {verdict}" + (f" ({counts})" if counts else " (no status changed)")
    return text + (f"; behaviour moved: {moved}" if moved else "" if b.note else "; no behaviour moved")


def cause(d: Diff, change: CellChange) -> str:
    """Why a cell may have changed: its target's code, the environment, both or neither."""
    code = change.entry in d.digests_changed
    env = bool(d.environment_changed)
    if code and env:
        return "target code and environment changed"
    if code:
        return "target code changed"
    if env:
        return "environment changed, target code did not"
    return "same code and environment: not deterministic?"


def render_text(d: Diff, b: BehaviourDiff = NO_BEHAVIOUR) -> str:
    """Plain text for a terminal or a CI log: the verdicts, the layers, then every change."""
    lines = [headline(d, b), f"verdict: {d.old_verdict} -> {d.new_verdict}"]
    lines += [f"  {line}" for line in behaviour_report.summary(b)] if b is not NO_BEHAVIOUR else []
    lines += _underneath(d, bullet="  ")
    regressions = d.of("regression")
    if regressions:
        lines += ["", TITLES["regression"] + ", by cause:"]
        for number, group in enumerate(by_cause(regressions), 1):
            lines.append(f"  [{number}] {group.title}: {_counted(group)}")
            for c in group.changes:
                lines.append(f"    {c.where}: {c.old} -> {c.new} ({cause(d, c)}): {c.message}")
                lines.append(f"      repro: {c.repro}")
    for kind in CLASSES[1:]:
        changes = d.of(kind)
        if changes:
            lines += ["", f"{TITLES[kind]}:"]
            lines += [f"  {c.where}: {c.old} -> {c.new}" + (f": {c.message}" if c.message and kind != "fix" else "")
                      for c in changes]
    lines += behaviour_report.text_lines(b)
    lines += _membership(d, bullet="  ")
    return "\n".join(lines) + "\n"


def render_markdown(d: Diff, b: BehaviourDiff = NO_BEHAVIOUR) -> str:
    """GitHub-flavoured Markdown, for a pull-request comment or a job summary."""
    lines = [f"## {headline(d, b)}", "", f"Gate verdict: `{d.old_verdict}` → `{d.new_verdict}`"]
    underneath = _underneath(d, bullet="- ")
    if underneath:
        lines += [""] + underneath
    regressions = d.of("regression")
    if regressions:
        lines += ["", f"### {TITLES['regression']}"]
        for number, group in enumerate(by_cause(regressions), 1):
            lines += ["", f"**{number}. {markdown_text(group.title)}**: {markdown_text(_counted(group))}", "",
                      "| cell | was | now | why | message | repro |", "|---|---|---|---|---|---|"]
            lines += [f"| {c.where} | {c.old} | {c.new} | {cause(d, c)} | {markdown_text(c.message)} | `{c.repro}` |"
                      for c in group.changes]
    for kind in CLASSES[1:]:
        changes = d.of(kind)
        if changes:
            lines += ["", f"### {TITLES[kind]}", "", "| cell | was | now |", "|---|---|---|"]
            lines += [f"| {c.where} | {c.old} | {c.new} |" for c in changes]
    if b is not NO_BEHAVIOUR:
        lines += behaviour_report.markdown_lines(b)
    membership = _membership(d, bullet="- ")
    if membership:
        lines += membership
    return "\n".join(lines) + "\n"


def _underneath(d: Diff, *, bullet: str) -> list[str]:
    lines = []
    if d.environment_changed:
        changed = "; ".join(f"{key} {old} -> {new}" for key, old, new in d.environment_changed)
        lines.append(f"{bullet}environment changed: {changed}")
    if d.digests_changed:
        lines.append(f"{bullet}target code changed (its source text, digest): {', '.join(d.digests_changed)}")
    return lines


#: Added or removed names listed before the rest are counted.
LISTED = 20


def _membership(d: Diff, *, bullet: str) -> list[str]:
    groups = [("Entries added", d.entries_added), ("Entries removed", d.entries_removed),
              ("Cells added", d.cells_added), ("Cells removed", d.cells_removed)]
    lines = []
    for title, names in groups:
        if names:
            lines += ["", f"{title} ({len(names)}):"] + [f"{bullet}{n}" for n in names[:LISTED]]
            if len(names) > LISTED:
                lines.append(f"{bullet}... and {len(names) - LISTED} more")
    return lines


def _counted(group: ChangeCause) -> str:
    """``3 cells in 2 entries; owners @a, @b``."""
    cells, entries, owners = len(group.changes), len(group.entries), group.owners
    return (f"{cells} cell{'s' * (cells != 1)} in {entries} entr{'ies' if entries != 1 else 'y'}; "
            f"owner{'s' * (len(owners) != 1)} {', '.join(owners)}")

"""A :class:`~audit.results.changes.Diff` as text for a terminal or as Markdown, read from the top: the verdict,
what changed underneath, regressions grouped by owner, then the rest."""

from __future__ import annotations

from audit.reporters.common import markdown_text
from audit.results.changes import CLASSES, TITLES, CellChange, Diff


def headline(d: Diff) -> str:
    """One line: the verdict and the count of each class present."""
    counts = ", ".join(f"{len(d.of(kind))} {kind.replace('_', ' ')}" for kind in CLASSES if d.of(kind))
    verdict = "REGRESSION" if d.regressed else "no regression"
    return f"audit diff: {verdict}" + (f" ({counts})" if counts else " (no status changed)")


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


def render_text(d: Diff) -> str:
    """Plain text for a terminal or a CI log."""
    lines = [headline(d), f"verdict: {d.old_verdict} -> {d.new_verdict}"]
    lines += _underneath(d, bullet="  ")
    regressions = d.of("regression")
    if regressions:
        lines += ["", TITLES["regression"] + ", by owner:"]
        for owner, owned in _by_owner(regressions):
            lines.append(f"  {owner}")
            for c in owned:
                lines.append(f"    {c.where}: {c.old} -> {c.new} ({cause(d, c)}): {c.message}")
                lines.append(f"      repro: {c.repro}")
    for kind in CLASSES[1:]:
        changes = d.of(kind)
        if changes:
            lines += ["", f"{TITLES[kind]}:"]
            lines += [f"  {c.where}: {c.old} -> {c.new}" + (f": {c.message}" if c.message and kind != "fix" else "")
                      for c in changes]
    lines += _membership(d, bullet="  ")
    return "\n".join(lines) + "\n"


def render_markdown(d: Diff) -> str:
    """GitHub-flavoured Markdown, for a pull-request comment or a job summary."""
    lines = [f"## {headline(d)}", "", f"Gate verdict: `{d.old_verdict}` → `{d.new_verdict}`"]
    underneath = _underneath(d, bullet="- ")
    if underneath:
        lines += [""] + underneath
    regressions = d.of("regression")
    if regressions:
        lines += ["", f"### {TITLES['regression']}"]
        for owner, owned in _by_owner(regressions):
            lines += ["", f"**{markdown_text(owner)}**", "", "| cell | was | now | why | message | repro |",
                      "|---|---|---|---|---|---|"]
            lines += [f"| {c.where} | {c.old} | {c.new} | {cause(d, c)} | {markdown_text(c.message)} | `{c.repro}` |"
                      for c in owned]
    for kind in CLASSES[1:]:
        changes = d.of(kind)
        if changes:
            lines += ["", f"### {TITLES[kind]}", "", "| cell | was | now |", "|---|---|---|"]
            lines += [f"| {c.where} | {c.old} | {c.new} |" for c in changes]
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
        lines.append(f"{bullet}target code changed (digest): {', '.join(d.digests_changed)}")
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


def _by_owner(changes) -> list[tuple[str, list[CellChange]]]:
    owners: dict[str, list[CellChange]] = {}
    for change in changes:
        owners.setdefault(", ".join(change.owners) or "(no owner)", []).append(change)
    return sorted(owners.items())

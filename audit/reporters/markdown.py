"""The matrix as Markdown: verdict, environment, entries × checks, then every failure spelled out."""

from __future__ import annotations

from audit.reporters import causes
from audit.reporters.common import (columns, group, headline, markdown_text, owner_groups, registry_of, row_label, rows,
                                    worst)
from audit.results.cells import Cell
from audit.reporters.statuses import PRESENTATION
from audit.results.matrix import Matrix


def render(matrix: Matrix, *, by_owner: bool = False, owner: str | None = None) -> str:
    """Markdown text of ``matrix``; ``by_owner``: one table per owner; ``owner``: that owner's causes first."""
    lines = [f"# {headline(matrix)}", "", _environment(matrix.environment or {}), ""]
    if by_owner:
        for owner, narrowed in owner_groups(matrix):
            lines += [f"## {markdown_text(owner)}", ""] + _table(narrowed) + [""]
    else:
        lines += _table(matrix)
    return "\n".join(lines + by_cause(matrix, owner)) + "\n"


def by_cause(matrix: Matrix, owner: str | None = None) -> list[str]:
    """The failures grouped by cause, as Markdown: a heading per tier, one per cause, its lines as a list."""
    found = causes.grouped(matrix, owner)
    lines = ["", "## Failures by cause"] if found else []
    for tier, numbered in causes.tiers(found):
        lines += ["", f"### {markdown_text(causes.tier_heading(tier, found))}"]
        for number, cause in numbered:
            lines += ["", f"**{number}. {markdown_text(cause.title)}**", ""]
            lines += [f"{'  ' * line.startswith('  ')}- {markdown_text(line.strip())}"
                      for _, line in causes.lines(cause, registry_of(matrix))]
    return lines


def _environment(env: dict) -> str:
    parts = [f"torch {env.get('torch')}", f"Python {env.get('python')}", f"CUDA {env.get('cuda') or 'none'}",
             f"devices {', '.join(env.get('devices') or [])}", f"seed {env.get('seed')}",
             f"registry sha256 `{(env.get('registry_sha256') or '')[:12]}`"]
    if env.get("git_commit"):
        parts.append(f"commit `{env['git_commit'][:12]}`")
    return " · ".join(parts)


def _table(matrix: Matrix) -> list[str]:
    names = columns(matrix)
    lines = ["| entry | owner | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for entry, device in rows(matrix):
        row = [markdown_text(row_label(entry, device)), markdown_text(", ".join(entry.owners))]
        row += [_cell(group(entry, name, device)) for name in names]
        lines.append("| " + " | ".join(row) + " |")
    return lines


def _cell(cells: list[Cell]) -> str:
    status = worst(cells)
    if status is None:
        return "·"
    count = sum(c.status is status for c in cells)
    return f"{PRESENTATION[status].emoji} {status.value}" + (f" ×{count}" if count > 1 else "")

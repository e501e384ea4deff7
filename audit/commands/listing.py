"""``audit list``: entries, owners and the cells an audit would run."""

from __future__ import annotations

import click

from audit.commands.select import check_table, select_entries
from audit.contract import Exit
from audit.engine.plan import claimed_in, entry_devices, planned_checks
from audit.registry.load import load_registry


def listing(registry_path: str, patterns) -> int:
    """One line per entry, then its checks (claimed ones marked *)."""
    registry = load_registry(registry_path)
    checks = check_table(registry, code=False)  # declarations: no torch import
    lines = [_line(entry, checks) for entry in select_entries(registry, patterns)]
    lines.append("(* claimed or always required; the rest run as probes: unsupported or xpass)")
    click.echo("\n".join(lines))  # one write: 1,000 entries are 1,000 lines
    return Exit.OK


def _line(entry, checks: dict) -> str:
    """The entry, its cell count and its checks, a check claimed in any of its cells marked *."""
    devices = len(entry_devices(entry))
    planned = [(name, dtypes) for name, dtypes in planned_checks(entry, checks) if dtypes and devices]
    cells = sum(len(dtypes) * devices for _, dtypes in planned)
    shown = " ".join(f"{name}{'*' if any(claimed_in(entry, checks[name], d) for d in dtypes) else ''}"
                     for name, dtypes in planned)
    return (f"{entry.name}  [{entry.kind}] {entry.target}  owner {', '.join(entry.owners)}  "
            f"{cells} cells: {shown}")

"""``audit list``: entries, owners and the cells an audit would run."""

from __future__ import annotations

import click

from audit.commands.select import check_table, select_entries
from audit.contract import Exit
from audit.engine.plan import claims, plan
from audit.registry.load import load_registry


def listing(registry_path: str, patterns) -> int:
    """One line per entry, then its checks (claimed ones marked *)."""
    registry = load_registry(registry_path)
    checks = check_table(registry, code=False)  # declarations: no torch import
    for entry in select_entries(registry, patterns):
        keys = plan(entry, checks)
        claimed = {}
        for key, value in claims(entry, checks, keys).items():
            claimed[key.check] = claimed.get(key.check, False) or value
        shown = " ".join(f"{n}{'*' if c else ''}" for n, c in claimed.items())
        click.echo(f"{entry.name}  [{entry.kind}] {entry.target}  owner {', '.join(entry.owners)}  "
                   f"{len(keys)} cells: {shown}")
    click.echo("(* claimed or always required; the rest run as probes: unsupported or xpass)")
    return Exit.OK

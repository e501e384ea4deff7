"""``audit list``: entries, owners and the cells an audit would run."""

from __future__ import annotations

from dataclasses import fields
from operator import attrgetter

import click

from audit.checks import declarations
from audit.commands.select import check_table, select_entries
from audit.core.contract import Exit
from audit.engine.plan import claimed_in, entry_devices, planned_checks
from audit.registry.load import load_registry
from audit.registry.model import Entry

#: The entry's own fields no built-in check's declaration reads (its kinds, applies, dtypes and claims): two
#: entries that differ only in these get the same checks, cells and claims (tests/commands/test_listing.py).
UNREAD_BY_DECLARATIONS = frozenset({"name", "line", "owners", "target"})
#: Everything else: what the plan of an entry may depend on, as one hashable tuple.
plan_key = attrgetter(*(f.name for f in fields(Entry) if f.name not in UNREAD_BY_DECLARATIONS))


def listing(registry_path: str, patterns) -> int:
    """One line per entry, then its checks (claimed ones marked *)."""
    registry = load_registry(registry_path)
    checks = check_table(registry, code=False)  # declarations: no torch import
    summary = Summaries(checks)
    lines = [_line(entry, summary) for entry in select_entries(registry, patterns)]
    lines.append("(* claimed or always required; the rest run as probes: unsupported or xpass)")
    click.echo("\n".join(lines))  # one write: 1,000 entries are 1,000 lines
    return Exit.OK


def _line(entry, summary: Summaries) -> str:
    """The entry, its cell count and its checks, a check claimed in any of its cells marked *."""
    return (f"{entry.name}  [{entry.kind}] {entry.target}  owner {', '.join(entry.owners)}  "
            f"{summary(entry)}")


class Summaries:
    """An entry's cell count and checks (``23 cells: forward* gradcheck* ...``), planned once per distinct
    :func:`plan_key`: a generated registry repeats one shape a thousand times. Only over the built-in
    declarations, whose reads are known; a local check may read any field, so its entries are each planned."""

    def __init__(self, checks: dict):
        builtin = declarations()
        self.checks = checks
        self.seen: dict | None = {} if all(builtin.get(n) is c for n, c in checks.items()) else None

    def __call__(self, entry: Entry) -> str:
        """The summary of ``entry``'s plan."""
        if self.seen is None:
            return summarise(entry, self.checks)
        key = plan_key(entry)
        try:
            found = self.seen.get(key)
        except TypeError:  # an unhashable value (a list passed as an argument): planned afresh
            return summarise(entry, self.checks)
        if found is None:
            found = self.seen[key] = summarise(entry, self.checks)
        return found


def summarise(entry: Entry, checks: dict) -> str:
    """The cells ``entry`` gets and its checks in table order, a check claimed in any of its cells marked *."""
    devices = len(entry_devices(entry))
    planned = [(name, dtypes) for name, dtypes in planned_checks(entry, checks) if dtypes and devices]
    cells = sum(len(dtypes) * devices for _, dtypes in planned)
    shown = " ".join(f"{name}{'*' if any(claimed_in(entry, checks[name], d) for d in dtypes) else ''}"
                     for name, dtypes in planned)
    return f"{cells} cells: {shown}"

"""A scan against the registry: registered and used, used but unregistered (the intake gate), registered
but not seen."""

from __future__ import annotations

from dataclasses import dataclass

from audit.registry.model import EntryKind
from audit.scan.findings import Finding


@dataclass(frozen=True)
class Comparison:
    """The three lists; ``unregistered`` fails the gate."""

    used: tuple[tuple[Finding, str], ...]
    unregistered: tuple[Finding, ...]
    unseen: tuple[str, ...]

    def to_json(self) -> dict:
        """For ``--format json``."""
        return {"registered_and_used": [dict(f.to_json(), entry=name) for f, name in self.used],
                "used_but_unregistered": [f.to_json() for f in self.unregistered],
                "registered_but_not_seen": list(self.unseen),
                "verdict": "fail" if self.unregistered else "pass"}


def compare(findings: list[Finding], registry, *, resolve: bool = True) -> Comparison:
    """Match findings to entries: a Function to a ``function`` entry naming it (through any alias) or to a
    ``callable``/``module`` entry defined in the Function's own module (a wrapper registered beside it
    covers it); an operator to an ``op`` entry of the same ``namespace::name``."""
    by_target: dict[str, str] = {}
    wrappers: dict[str, str] = {}
    for entry in registry.entries if registry else ():
        for key in _keys(entry, resolve):
            by_target.setdefault(key, entry.name)
        if entry.kind in (EntryKind.CALLABLE, EntryKind.MODULE):
            wrappers.setdefault(entry.target.partition(":")[0], entry.name)
    used, unregistered, seen = [], [], set()
    for finding in findings:
        name = by_target.get(finding.target) or (wrappers.get(finding.target.partition(":")[0])
                                                 if finding.kind == "function" else None)
        if name:
            used.append((finding, name))
            seen.add(name)
        else:
            unregistered.append(finding)
    unseen = tuple(e.name for e in (registry.entries if registry else ())
                   if e.kind in (EntryKind.FUNCTION, EntryKind.OP) and e.name not in seen)
    return Comparison(tuple(used), tuple(unregistered), unseen)


def _keys(entry, resolve: bool) -> list[str]:
    if entry.kind == EntryKind.OP:
        namespace, _, rest = entry.target.partition("::")
        return [f"{namespace}::{rest.split('.')[0]}"]
    keys = [entry.target]
    if resolve and entry.kind == EntryKind.FUNCTION:
        try:
            from audit.runtime.target import import_object
            from audit.scan.tracing import function_target

            keys.append(function_target(import_object(entry.target)))
        except Exception:  # an entry that does not import is the audit's to report, not the scan's
            pass
    return keys

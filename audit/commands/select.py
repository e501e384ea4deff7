"""Choosing entries and checks from the command line; an empty selection is a usage error."""

from __future__ import annotations

import fnmatch
from pathlib import Path

from audit.core.errors import Problem, RegistryError, UsageError


def select_entries(registry, patterns) -> list:
    """Entries whose name matches any pattern (all when none); exit 2 when nothing matches."""
    if not patterns:
        return list(registry.entries)
    chosen = [e for e in registry.entries if any(fnmatch.fnmatchcase(e.name, p) for p in patterns)]
    if not chosen:
        names = ", ".join(e.name for e in registry.entries)
        raise UsageError(f"--select {' '.join(patterns)} matches no entry; the registry has: {names}")
    return chosen


def check_table(registry, *, code: bool = True) -> dict:
    """Built-in checks plus the registry's local ``checks/`` folder; every opted-in name must exist. Without
    ``code``: the built-in declarations only (no torch), and local checks only when an entry opts into one."""
    folder: Path | None = checks_dir(registry)
    if not code and not any(entry.checks for entry in registry.entries):
        folder = None
    return _table(registry, folder, code)


def run_table(registry, cache_dir: str | None = None) -> dict:
    """The table a run plans, keys its result cache and judges with: :func:`check_table`'s names, order,
    versions and claims, but the built-in checks as declarations, without torch (the workers import the checks'
    code; a run the cache serves whole never needs it). With a ``cache_dir``, local checks too are their stored
    declarations where those are current (:mod:`audit.engine.declarations`); else they are imported."""
    return _table(registry, checks_dir(registry), code=False, cache_dir=cache_dir)


def _table(registry, folder: Path | None, code: bool, cache_dir: str | None = None) -> dict:
    from audit.checks import declarations, merged, table

    try:
        if cache_dir and folder and not code:
            from audit.engine.declarations import local_table  # the cache's: ``audit list`` never needs it

            checks = merged(declarations(), local_table(folder, registry.entries, Path(cache_dir)), folder)
        else:
            checks = table(folder, code=code)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    problems = [Problem(registry.path, e.line, 1, f"{e.name}.checks", f"no check named {name!r} in {folder}")
                for e in registry.entries for name in e.checks if name not in checks]
    if problems:
        raise RegistryError(problems)
    return checks


def checks_dir(registry) -> Path:
    """The repository's own checks: ``checks/`` beside the registry."""
    return Path(registry.path).resolve().parent / "checks"


def select_checks(checks: dict, names) -> set | None:
    """The ``--check`` names, each known; None for all."""
    unknown = [n for n in names if n not in checks]
    if unknown:
        raise UsageError(f"unknown check {', '.join(unknown)}; known: {', '.join(checks)}")
    return set(names) or None


def resources_selected(names) -> tuple[str, ...]:
    """The per-worker resources (:mod:`audit.checking.resources`) the built-in checks among the ``--check`` names
    (all when none are given) need: the worker that holds their cells starts them at start-up."""
    from audit.catalog.checks import CATALOG
    from audit.checking.resources import needed

    return needed(CATALOG[name] for name in (names or CATALOG) if name in CATALOG)

"""pytest plugin: ``pytest --audit-registry registry.yaml`` makes each (entry, check) a test item.

Items report at the entry's registry line and fail with the audit's compact message (what, where, by
how much, owner, replay command), not a traceback. The audit itself runs once, in worker processes, for
every selected item, on the first item that needs it. Without the option the plugin does nothing, and
it never imports torch at collection.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from audit.core.contract import Status
from audit.runtime.settings import PLUGIN, declared, settable, settle

_RESULTS = pytest.StashKey[dict]()
_REGISTRIES = pytest.StashKey[list]()


def pytest_addoption(parser) -> None:
    group = parser.getgroup("autograd-audit")
    group.addoption("--audit-registry", action="append", default=[], metavar="PATH",
                    help="Audit this registry's entries as test items (repeatable).")
    for found in declared():  # the run settings declared for the plugin, each --audit-NAME
        if PLUGIN in found.setting.sources:
            group.addoption(_option(found.name), type=found.type, default=None, metavar=found.name.upper(),
                            help=f"{found.setting.help} (default: {found.default})")


def _option(name: str) -> str:
    """The plugin's option for the run setting ``name``: ``--audit-`` and its name."""
    return f"--audit-{name.replace('_', '-')}"


def _settings(config):
    """The run settings the pytest command line gave (the rest at their defaults)."""
    given = {name: config.getoption(_option(name)) for name in settable(PLUGIN)}
    return settle({name: value for name, value in given.items() if value is not None})


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "audit: an (entry, check) of an autograd-audit registry")
    registries = [Path(p).resolve() for p in config.getoption("audit_registry")]
    config.stash[_REGISTRIES] = registries
    for path in registries:  # collected like any path given on the command line
        if not path.is_file():
            raise pytest.UsageError(f"--audit-registry {path}: no such file")
        config.args.append(str(path))


def pytest_collect_file(file_path: Path, parent):
    if file_path.resolve() in parent.config.stash.get(_REGISTRIES, ()):
        return RegistryFile.from_parent(parent, path=file_path)
    return None


class BadRegistry(Exception):
    """The registry is invalid: reported as a collection error with file, line and key path, no traceback."""


class RegistryFile(pytest.File):
    """A registry: one item per entry and check that has cells."""

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, BadRegistry):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def collect(self):
        from audit.commands.select import check_table
        from audit.core.errors import AuditError, RegistryError
        from audit.registry.load import load_registry

        try:
            registry = load_registry(self.path)
            table = check_table(registry)
        except RegistryError as exc:
            raise BadRegistry(f"{exc}\n{len(exc.problems)} problem(s) in the registry; nothing was audited") from None
        except AuditError as exc:
            raise BadRegistry(f"{self.path}: {exc}") from None
        from audit.engine.plan import plan

        for entry in registry.entries:
            for check in dict.fromkeys(key.check for key in plan(entry, table)):
                yield AuditItem.from_parent(self, name=f"{entry.name}::{check}", entry=entry, check=check,
                                            registry=registry)


class AuditItem(pytest.Item):
    """One (entry, check): passes when none of its cells fails the gate."""

    def __init__(self, *, entry, check: str, registry, **kwargs):
        super().__init__(**kwargs)
        self.entry, self.check, self.registry = entry, check, registry
        self.add_marker(pytest.mark.audit)

    def runtest(self) -> None:
        results = _results(self.session, self.config)
        cells = results.get((self.registry.path, self.entry.name, self.check), [])
        failing = [c for c in cells if c.gates(strict=False)]
        if failing:
            raise AuditFailure(self.entry, failing)
        if cells and all(c.status is Status.SKIP for c in cells):
            pytest.skip("; ".join(f"{c.dtype}, {c.device}: {c.message}" for c in cells))
        not_holding = [c for c in cells if c.status in (Status.UNSUPPORTED, Status.WAIVED)]
        if not_holding and not any(c.claimed and c.status is Status.PASS for c in cells):
            # Unclaimed (or waived) and it does not hold: recorded, not gated, and never shown as PASSED.
            pytest.xfail("; ".join(f"{c.dtype}, {c.device}: {c.status.value}: {c.message}" for c in not_holding))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, AuditFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style)

    def reportinfo(self):
        return self.path, self.entry.line - 1, f"{self.entry.name}::{self.check}"


class AuditFailure(Exception):
    """The compact failure of an item: each failing cell, its owner and its replay command."""

    def __init__(self, entry, cells):
        lines = [f"{entry.name} (owner {', '.join(entry.owners)}, registry line {entry.line}):"]
        for cell in cells:
            lines.append(f"  {cell.check} {cell.status.value.upper()} ({cell.dtype}, {cell.device}): {cell.message}")
            lines.append(f"    repro: {cell.repro}")
            lines += [f"    also: {other.message}" for other in cell.failures[1:]]  # further failures, other kinds
        super().__init__("\n".join(lines))


def _results(session, config) -> dict:
    """Audit every selected item's entry once (in workers); cells by (registry, entry, check)."""
    if _RESULTS in config.stash:
        return config.stash[_RESULTS]
    from audit.runtime.options import RunOptions
    from audit.engine.runner import audit_entries

    wanted: dict = {}
    for item in session.items:
        if isinstance(item, AuditItem):
            wanted.setdefault(item.registry.path, (item.registry, {}))[1].setdefault(item.entry.name, set()).add(
                item.check)
    found: dict = {}
    for path, (registry, entries) in wanted.items():
        from audit.commands.select import check_table, checks_dir

        table = check_table(registry)
        chosen = [e for e in registry.entries if e.name in entries]
        options = RunOptions.of(_settings(config), base=str(Path(path).resolve().parent),
                                checks_dir=str(checks_dir(registry)))
        only = set().union(*entries.values())
        for result in audit_entries(registry, chosen, table, options, only=only).entries:
            for cell in result.cells:
                found.setdefault((path, result.entry.name, cell.check), []).append(cell)
    config.stash[_RESULTS] = found
    return found


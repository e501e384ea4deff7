"""The checks: a named, ordered table (the matrix's column order), plus a repository's own.

Each built-in check is declared in :mod:`audit.checks.catalog` (contract, claims, dtypes) and coded in its
module; see :class:`audit.checks.interface.Check`. Importing a check module imports torch;
:func:`builtin_names` and :func:`declarations` do not.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from audit.checks.catalog import CATALOG
from audit.checks.interface import Check

#: Built-in checks in matrix order: the contract's CHECK_NAMES (the catalog is ordered by it).
BUILTIN_MODULES = tuple(CATALOG)


def builtin_names() -> tuple[str, ...]:
    """Names of the built-in checks, in order, without importing torch."""
    return BUILTIN_MODULES


def declarations() -> dict[str, Check]:
    """The built-in checks' declarations (contract, claims, dtypes, kinds...) without their code, and so
    without importing torch: what ``audit list`` and the reports need."""
    return dict(CATALOG)


def builtin() -> dict[str, Check]:
    """The built-in checks by name, in matrix order."""
    return {name: importlib.import_module(f"audit.checks.{name}").CHECK for name in BUILTIN_MODULES}


def local(folder: Path) -> dict[str, Check]:
    """Checks defined in a repository's ``checks/`` folder (``CHECK`` in each module), by file name."""
    found: dict[str, Check] = {}
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else ():
        if path.name.startswith("_"):
            continue
        spec = importlib.util.spec_from_file_location(f"audit_local_checks.{path.stem}", path)
        if spec is None or spec.loader is None:  # a .py file is always loadable: this never happens
            continue
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        check = getattr(module, "CHECK", None)
        if isinstance(check, Check):
            found[check.name] = check
    return found


def table(folder: Path | None, *, code: bool = True) -> dict[str, Check]:
    """Built-in checks, then local ones; a local check may not reuse a built-in name. Without ``code``, the
    built-in checks are their declarations only (no torch import); local checks are always imported."""
    checks = builtin() if code else declarations()
    for name, check in (local(folder) if folder else {}).items():
        if name in checks:
            raise ValueError(f"local check {name!r} in {folder} reuses a built-in check's name")
        checks[name] = check
    return checks

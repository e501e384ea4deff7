"""The checks: a named, ordered table (the matrix's column order), plus a repository's own.

Each built-in check is declared in :mod:`audit.catalog.checks` (contract, claims, dtypes) and coded in its
module; see :class:`audit.catalog.interface.Check`. Importing a check module imports torch;
:func:`builtin_names` and :func:`declarations` do not.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from audit.catalog.checks import CATALOG
from audit.catalog.interface import Check

#: Built-in checks in matrix order: the catalog's (each module is named after its check).
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


def local_files(folder: Path) -> list[Path]:
    """The modules of a repository's ``checks/`` folder that may define a check, in table order."""
    return [p for p in sorted(folder.glob("*.py")) if not p.name.startswith("_")] if folder.is_dir() else []


def local_check(path: Path) -> Check | None:
    """The check a module of ``checks/`` defines (its ``CHECK``), imported; None when it defines none."""
    spec = importlib.util.spec_from_file_location(f"audit_local_checks.{path.stem}", path)
    if spec is None or spec.loader is None:  # a .py file is always loadable: this never happens
        return None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    check = getattr(module, "CHECK", None)
    return check if isinstance(check, Check) else None


def local(folder: Path) -> dict[str, Check]:
    """Checks defined in a repository's ``checks/`` folder (``CHECK`` in each module), by file name."""
    return {check.name: check for check in map(local_check, local_files(folder)) if check is not None}


def table(folder: Path | None, *, code: bool = True) -> dict[str, Check]:
    """Built-in checks, then local ones; a local check may not reuse a built-in name. Without ``code``, the
    built-in checks are their declarations only (no torch import); local checks are always imported."""
    return merged(builtin() if code else declarations(), local(folder) if folder else {}, folder)


def merged(builtins: dict[str, Check], locals_: dict[str, Check], folder: Path | None) -> dict[str, Check]:
    """``builtins`` then ``locals_`` (found in ``folder``); ValueError when a local check reuses a built-in name."""
    checks = dict(builtins)
    for name, check in locals_.items():
        if name in checks:
            raise ValueError(f"local check {name!r} in {folder} reuses a built-in check's name")
        checks[name] = check
    return checks

"""The checks: a named, ordered table (the matrix's column order), plus a repository's own.

Each built-in check states its contract in its module; see :class:`audit.checks.interface.Check`.
Importing a check module imports torch; :func:`builtin_names` does not.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path

from audit.checks.interface import Check

#: Built-in checks in matrix order (a subset of the contract's CHECK_NAMES, in the same order).
BUILTIN_MODULES = ("forward", "gradcheck", "gradgradcheck", "forward_ad", "undefined_grad", "empty",
                   "determinism", "dtype", "device", "noncontiguous", "alias", "saved_tensors", "vmap",
                   "compile", "autocast", "checkpoint", "opcheck", "export", "distributed",
                   "state_dict", "train_step", "accumulation", "partial_grad",
                   "shared_grad")


def builtin_names() -> tuple[str, ...]:
    """Names of the built-in checks, in order, without importing torch."""
    return BUILTIN_MODULES


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
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        check = getattr(module, "CHECK", None)
        if isinstance(check, Check):
            found[check.name] = check
    return found


def table(folder: Path | None) -> dict[str, Check]:
    """Built-in checks, then local ones; a local check may not reuse a built-in name."""
    checks = builtin()
    for name, check in (local(folder) if folder else {}).items():
        if name in checks:
            raise ValueError(f"local check {name!r} in {folder} reuses a built-in check's name")
        checks[name] = check
    return checks

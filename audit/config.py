"""Settings from ``[tool.autograd-audit]`` in ``pyproject.toml``: the command line over the file over
the built-in defaults, found from any folder below the project."""

from __future__ import annotations

import sys
from pathlib import Path

from audit.errors import UsageError

SECTION = "autograd-audit"
#: key in the file -> (the commands it sets, whether it is a path, relative to the file's folder)
KEYS = {
    "registry": (("run", "list", "repro"), True),
    "out": (("run",), True),
    "profile": (("run",), False),
    "jobs": (("run",), False),
    "examples": (("run", "repro"), False),
    "seed": (("run", "repro"), False),
    "devices": (("run",), False),
    "compile_backend": (("run", "repro"), False),
    "timeout": (("run",), False),
    "unclaimed_timeout": (("run",), False),
    "max_memory": (("run",), False),
    "strict": (("run", "merge"), False),
    "cache": (("run",), False),
    "cache_dir": (("run",), True),
    "cache_size": (("run",), False),
    "progress": (("run",), False),
}


#: Paths whose command-line default is relative to the working directory: with a settings file they are
#: relative to the file's folder (the project's root), as ruff and pytest root theirs, so that ``audit run``
#: from any subfolder audits the project's registry into the project's reports.
ROOTED_DEFAULTS = {"registry": "registry.yaml", "out": "reports"}


def find(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start`` with a ``[tool.autograd-audit]`` table."""
    for folder in (start, *start.parents):
        path = folder / "pyproject.toml"
        if path.is_file() and SECTION in _read(path).get("tool", {}):
            return path
    return None


def default_map(start: Path) -> dict:
    """Click's ``default_map``: per command, the settings the file gives (paths made absolute, and the
    default registry and out folder taken from the file's folder)."""
    path = find(start.resolve())
    if path is None:
        return {}
    table = _read(path)["tool"][SECTION]
    if not isinstance(table, dict):
        raise UsageError(f"{path}: [tool.{SECTION}] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise UsageError(f"{path}: [tool.{SECTION}] unknown key {unknown[0]!r}; expected one of: {', '.join(KEYS)}")
    defaults: dict = {}
    for key, value in {**ROOTED_DEFAULTS, **table}.items():
        commands, is_path = KEYS[key]
        value = str((path.parent / value).resolve()) if is_path else value
        for command in commands:
            defaults.setdefault(command, {})[key] = value
    return defaults


def _read(path: Path) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise UsageError(f"{path}: cannot read its [tool.{SECTION}] settings: {exc}") from None

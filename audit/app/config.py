"""Settings from ``[tool.autograd-audit]`` in ``pyproject.toml``, found from any folder below the project: the
keys the settings' declarations allow there (:mod:`audit.runtime.settings`), handed to click as the defaults
of each command that takes them (a flag wins over them, and they over a profile)."""

from __future__ import annotations

import sys
from pathlib import Path

from audit.core.errors import UsageError
from audit.runtime.settings import PYPROJECT, SECTION, declared, refuse

#: key in the file -> (the commands it sets, whether it is a path, relative to the file's folder): the settings
#: ``pyproject.toml`` may set (:mod:`audit.runtime.settings`), each for ``audit run`` and the commands it names.
KEYS = {d.name: (("run", *d.setting.also), bool(d.setting.path)) for d in declared() if PYPROJECT in d.setting.sources}


#: Paths whose command-line default is relative to the working directory: with a settings file they are
#: relative to the file's folder (the project's root), as ruff and pytest root theirs, so that ``audit run``
#: from any subfolder audits the project's registry into the project's reports.
ROOTED_DEFAULTS = {d.name: d.default for d in declared() if d.name in KEYS and d.setting.path and d.default}


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
    refuse(table, PYPROJECT, where=f"{path}: ")
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

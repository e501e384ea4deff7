"""Read ``registry.yaml``: every problem found is reported with file, line, column and key path."""

from __future__ import annotations

import contextlib
import datetime
import gc
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from audit.core.errors import Problem, RegistryError
from audit.registry import quick
from audit.registry import schema as schema_mod
from audit.registry.build import build_entry
from audit.registry.model import Registry
from audit.registry.semantics import entry_problems, registry_problems
from audit.registry.yamltree import Located, Refused, dotted, parse

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


def load_registry(path: str | Path) -> Registry:
    """Load and validate a registry; raises :class:`RegistryError` listing every problem."""
    return parse_registry(_read(Path(path)), Path(path))


def parse_registry(raw: bytes, path: str | Path) -> Registry:
    """Validate registry text; ``path`` is what problems and the matrix name it by."""
    with collection_paused():
        return _validated(raw, Path(path))


@contextlib.contextmanager
def collection_paused() -> Iterator[None]:
    """No cyclic garbage collection inside: reading a registry makes tens of thousands of objects (YAML nodes,
    marks, entries) and hardly a cycle, and each collection would traverse them all again (a twentieth of
    ``audit list`` on 1,000 entries). What cycles there are (a refused recursive alias) are collected after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _validated(raw: bytes, path: Path) -> Registry:
    located = _parse(raw, path)
    problems = _schema_problems(located, str(path))
    document = located.data if isinstance(located.data, dict) else {}  # a mapping: _parse refuses anything else
    merged = merge_defaults(document) if _mergeable(document) else []
    # Every problem at once: the rules beyond the schema run on entries the schema faulted too (each rule
    # passes over values of the wrong type, which the schema has named already).
    problems += registry_problems(merged, located, str(path))
    problems += [p for i, entry in enumerate(merged) for p in entry_problems(entry, i, located, str(path))]
    if problems:
        raise RegistryError(problems)
    entries = tuple(build_entry(e, located.where(("entries", i))[0]) for i, e in enumerate(merged))
    profiles = tuple((name, tuple(sorted(values.items())))
                     for name, values in (document.get("profiles") or {}).items())
    return Registry(path=str(path), sha256=hashlib.sha256(raw).hexdigest(), entries=entries, profiles=profiles)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise RegistryError([Problem(str(path), 1, 1, "", f"cannot read the registry: {exc.strerror}")]) from None


def _parse(raw: bytes, path: Path) -> Located:
    try:
        located = parse(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise RegistryError([Problem(str(path), 1, 1, "", f"expected UTF-8 text ({exc.reason})")]) from None
    except Refused as exc:
        raise RegistryError([Problem(str(path), exc.line, exc.column, dotted(exc.path), exc.message)]) from None
    except yaml.reader.ReaderError as exc:
        raise RegistryError([_unreadable(raw, path, exc)]) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise RegistryError([Problem(str(path), line, col, "", f"invalid YAML: {exc.problem}")]) from None
    if located.duplicates:
        raise RegistryError([Problem(str(path), ln, col, dotted(p), "duplicate key")
                             for p, (ln, col) in located.duplicates])
    if not isinstance(located.data, dict):
        got = schema_mod.describe(located.data)
        expected = f"expected a mapping with 'version' and 'entries', got {got}"
        raise RegistryError([Problem(str(path), 1, 1, "", expected)])
    return located


def _unreadable(raw: bytes, path: Path, exc: yaml.reader.ReaderError) -> Problem:
    """A character YAML refuses (a NUL, a control character), located; NULs usually mean UTF-16."""
    before = raw.decode("utf-8", errors="replace")[:exc.position]
    line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
    code = exc.character if isinstance(exc.character, int) else ord(exc.character)
    hint = " (UTF-16 text without a byte-order mark? save the registry as UTF-8)" if code == 0 else ""
    return Problem(str(path), line, column, "", f"expected UTF-8 text without control characters, got "
                                                f"U+{code:04X}{hint}")


def _schema_problems(located: Located, file: str) -> list[Problem]:
    if quick.valid(located.data):  # most registries: the yes alone, without jsonschema's descent (or import)
        return []
    try:
        validator = schema_mod.validator()
    except ImportError:  # a machine without it (a GPU runner used as it is): the no, without where and why
        return [Problem(file, 1, 1, "", WITHOUT_JSONSCHEMA)]
    problems = []
    for error in validator.iter_errors(located.data):
        problems += _problems_of(error, located, file)
    return problems


#: What an invalid registry is told where jsonschema, which locates and phrases each problem, is not installed.
WITHOUT_JSONSCHEMA = ("does not satisfy the registry schema (version 1); jsonschema, which says where and why, is not "
                      "installed here: pip install 'jsonschema>=4.18', or run audit validate where it is")


def _problems_of(error: ValidationError, located: Located, file: str) -> list[Problem]:
    path = tuple(error.absolute_path)
    kind, _, value, owner = schema_mod.fields(error)
    if kind == "additionalProperties":
        allowed = sorted(owner.get("properties", {}))
        extras = [k for k in value if k not in allowed]
        hint = f"; expected one of: {', '.join(allowed)}"
        return [Problem(file, *located.where(path + (k,), key=True), dotted(path + (k,)), f"unknown key{hint}")
                for k in extras]
    return [Problem(file, *located.where(path), dotted(path), schema_mod.phrase(error))]


def _mergeable(document: dict[str, Any]) -> bool:
    entries, defaults = document.get("entries"), document.get("defaults", {})
    return (isinstance(entries, list) and isinstance(defaults, dict)
            and all(isinstance(e, dict) for e in entries))


def merge_defaults(document: dict[str, Any]) -> list[dict[str, Any]]:
    """Every entry with ``defaults`` merged in: the entry wins, mappings merge one level deep."""
    defaults = document.get("defaults", {})
    merged = []
    for entry in document.get("entries", []):
        combined = {**defaults, **entry}
        for key, value in defaults.items():
            if isinstance(value, dict) and isinstance(entry.get(key), dict):
                combined[key] = {**value, **entry[key]}
        merged.append(combined)
    return merged


def today() -> str:
    """Today's date as YYYY-MM-DD (UTC), the clock waivers expire against."""
    return datetime.datetime.now(datetime.timezone.utc).date().isoformat()

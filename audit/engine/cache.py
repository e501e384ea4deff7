"""The result cache for pre-merge runs: a cell's raw outcome, reused only when nothing that could change it
has changed.

The key covers the entry's spec (without owner, waivers or line, which only affect judging, redone every
run), the source files of the target, reference, ``load`` modules and local check, the check's name and
version, the dtype, device and claim (which sets the example count), the seed, examples and compile
backend, torch and Python versions, the devices present and the audit's own version. Errors are never
stored; an entry whose target cannot be found on disk is never cached. One small JSON file per cell; the
least recently used are evicted past the size bound.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from audit import __version__
from audit.core.io import write_atomic
from audit.registry.model import Entry, EntryKind
from audit.results.environment import Environment
from audit.results.outcome import CellKey, Outcome, Verdict, outcome_from_json, outcome_to_json

if TYPE_CHECKING:
    from audit.catalog.interface import Check
    from audit.runtime.options import RunOptions

#: Bump when the record's layout changes.
FORMAT = 1
#: Entry fields that do not change an outcome (judging is redone on every run).
JUDGING_ONLY = {"line", "owners", "expect"}


class Cache:
    """Records under ``folder``, at most ``max_bytes`` in all."""

    def __init__(self, folder: Path, max_bytes: int) -> None:
        self.folder = Path(folder)
        self.max_bytes = max_bytes
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> tuple[Outcome, str] | None:
        """The stored outcome and target digest for ``key``, or None."""
        path = self._path(key)
        try:
            found = _read_record(path.read_text())
            os.utime(path)  # recently used
        except OSError:
            self.misses += 1
            return None
        except ValueError:  # not a record this audit wrote (truncated, edited, another version): recompute
            path.unlink(missing_ok=True)
            self.misses += 1
            return None
        self.hits += 1
        return found

    def put(self, key: str, outcome: Outcome, digest: str | None) -> None:
        """Store ``outcome`` (never an error) under ``key``."""
        if outcome.verdict == Verdict.ERRORED or digest is None:
            return
        write_atomic(self._path(key), json.dumps({"format": FORMAT, "digest": digest,
                                                   "outcome": outcome_to_json(outcome)}))

    def prune(self) -> int:
        """Evict least recently used records until the total fits; returns how many were removed."""
        records = []
        for path in self.folder.glob("*/*.json") if self.folder.is_dir() else ():
            try:
                stat = path.stat()
            except OSError:
                continue
            records.append((stat.st_mtime, stat.st_size, path))
        total = sum(size for _, size, _ in records)
        removed = 0
        for _, size, path in sorted(records):
            if total <= self.max_bytes:
                break
            path.unlink(missing_ok=True)
            total -= size
            removed += 1
        return removed

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key[2:]}.json"


def code_fingerprint(entry: Entry, base: Path, checks_dir: Path | None = None) -> dict[str, str] | None:
    """sha256 of every source file the entry names, and of its local checks (None when a module cannot
    be found without importing it)."""
    modules = [entry.target.partition(":")[0]] if entry.kind != EntryKind.OP else []
    modules += list(entry.load)
    modules += [spec.partition(":")[0] for spec in (entry.reference, entry.proxy, entry.vjp) if spec]
    importable_from(base)
    from audit.runtime.native import is_native

    files: dict[str, str] = {}
    for item in [i for i in entry.load if is_native(i)]:
        path = base / item
        if not path.is_file():
            return None
        files[item] = _file_digest(path)
    modules = [m for m in modules if not is_native(m)]
    for module in modules:
        origin = module_file(module)
        if origin is None:
            return None
        files[module] = _file_digest(origin)
    for name in entry.checks:
        local = checks_dir / f"{name}.py" if checks_dir else None
        if local is None or not local.is_file():
            return None
        files[f"checks/{name}.py"] = _file_digest(local)
    return files


def audit_digest() -> str:
    """sha256 over the audit package's own source: a changed check re-audits everything."""
    digest = hashlib.sha256(__version__.encode())
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.rglob("*.py")) + sorted(root.rglob("*.json")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def cell_key(spec: str, check: Check, key: CellKey, claimed: bool, options: RunOptions, environment: Environment,
             code: dict[str, str], audit: str) -> str:
    """The cache key of one cell of the entry whose :func:`spec_digest` is ``spec`` (once per entry: a run the
    cache serves whole spends its time here)."""
    examples = options.examples if claimed else options.unclaimed_examples
    material = {
        "format": FORMAT, "audit": audit, "entry": spec, "code": code,
        "check": [check.name, check.version], "cell": [key.dtype, key.device, claimed],
        "run": [options.seed, examples, options.compile_backend, options.failures, options.shrink],
        "environment": [environment.torch, environment.python, environment.devices],
    }
    text = json.dumps(material, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode()).hexdigest()


def entry_spec(entry: Entry) -> dict[str, object]:
    """The entry as far as it can change an outcome: without the fields that only judging reads."""
    return {k: v for k, v in dataclasses.asdict(entry).items() if k not in JUDGING_ONLY}


def spec_digest(entry: Entry) -> str:
    """sha256 of :func:`entry_spec`."""
    return hashlib.sha256(json.dumps(entry_spec(entry), sort_keys=True, default=repr).encode()).hexdigest()


def importable_from(base: Path) -> None:
    """Put the places a worker imports from on this process's path: the registry's folder, and the working
    directory (sys.path[0] of `python -m audit.engine.worker`), which a console script's own sys.path lacks."""
    for folder in (str(base), os.getcwd()):
        if folder not in sys.path:
            sys.path.insert(0, folder)


def module_file(module: str) -> Path | None:
    """The file of ``module``: found on ``sys.path`` without importing it or its packages where it can be
    (``importlib.util.find_spec`` imports ``torch`` and ``torch.nn`` to find ``torch.nn.functional``, a common
    reference's module: seconds), else as importlib finds it (another finder: an editable install's)."""
    spec = _path_spec(module)
    if spec is None:
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            return None
    if spec is None or not spec.origin or not os.path.isfile(spec.origin):
        return None
    return Path(spec.origin)


def _path_spec(module: str) -> importlib.machinery.ModuleSpec | None:
    spec: importlib.machinery.ModuleSpec | None = None
    parts = module.split(".")
    for depth in range(len(parts)):
        name = ".".join(parts[:depth + 1])
        loaded = sys.modules.get(name)
        places = sys.path if spec is None else spec.submodule_search_locations
        if loaded is not None and getattr(loaded, "__spec__", None) is not None:
            spec = loaded.__spec__
        elif not parts[depth] or places is None:
            return None
        else:
            spec = importlib.machinery.PathFinder.find_spec(name, list(places))
            if spec is None:
                return None
    return spec


def _file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _read_record(text: str) -> tuple[Outcome, str]:
    """A stored record as (outcome, digest); ValueError when it is not valid JSON of the right shape."""
    record = json.loads(text)
    try:
        outcome, digest = outcome_from_json(record["outcome"]), record["digest"]
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a cache record: {exc}") from None
    fields = (outcome.key.check, outcome.key.dtype, outcome.key.device, outcome.verdict, outcome.message, digest)
    if not all(isinstance(f, str) for f in fields) or not isinstance(outcome.examples, int) \
            or not isinstance(outcome.seconds, (int, float)):
        raise ValueError("not a cache record: a field has the wrong type")
    return outcome, digest

"""A local check's declaration, stored beside the result cache: a run the cache serves whole imports no local check,
nor the torch a local check imports.

A local check is the repository's own code (``checks/simplex.py`` imports torch: 1-2 s). What the parent needs of
it is its declaration: name, version, claim, contract, entry kinds and resource, and for each entry that opts into
it whether it applies, its dtypes and what it claims in each; its cells' cache keys cover its source by digest, which
needs no import. Once a run has imported a local check, its declaration is stored under the digest of the check's
source and of the audit's own; a later run in which every entry that opts in finds its part there plans, keys and
judges with a stand-in built from it (:func:`local_table`). The workers import the check itself to run its cells.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from audit.checks import local_check, local_files
from audit.catalog.interface import Check
from audit.engine.cache import audit_digest, spec_digest
from audit.engine.plan import claimed_in
from audit.core.io import write_atomic
from audit.registry.model import Entry

#: The cache's subfolder that holds the declarations; bump FORMAT when a record's layout changes.
FOLDER = "declarations"
FORMAT = 1


def local_table(folder: Path, entries: Iterable[Entry], cache_dir: Path) -> dict[str, Check]:
    """The local checks of ``folder`` as ``entries`` need them: each a stand-in from its stored declaration where
    that covers every entry opting in (nothing imported), else the check itself, whose declaration is then stored."""
    entries = list(entries)
    found: dict[str, Check] = {}
    for path in local_files(folder):
        record_path = cache_dir / FOLDER / f"{path.stem}-{_source_digest(path)}.json"
        stored = _stand_in(_read(record_path), entries)
        check = stored or local_check(path)
        if stored is None and check is not None:
            write_atomic(record_path, json.dumps(declaration(check, entries), sort_keys=True))
        if check is not None:
            found[check.name] = check
    return found


def declaration(check: Check, entries: Iterable[Entry]) -> dict[str, Any]:
    """What the parent reads of ``check``, for each of ``entries`` that opts into it, as plain data."""
    planned = {}
    for entry in (e for e in entries if check.name in e.checks):
        applies = entry.kind in check.kinds and bool(check.applies(entry))
        dtypes = list(check.dtypes(entry)) if applies else []
        planned[spec_digest(entry)] = {"dtypes": dtypes, "claimed": {d: claimed_in(entry, check, d) for d in dtypes},
                                       "applies": applies}
    return {"format": FORMAT, "name": check.name, "version": check.version, "claim": check.claim,
            "contract": check.contract, "kinds": list(check.kinds), "resource": check.resource, "entries": planned}


def _stand_in(record: dict[str, Any] | None, entries: list[Entry]) -> Check | None:
    """A check built from ``record``, or None when it lacks an entry that opts in (or is not a record)."""
    if not record or record.get("format") != FORMAT:
        return None
    planned = record["entries"]
    if any(spec_digest(e) not in planned for e in entries if record["name"] in e.checks):
        return None

    def part(entry: Entry) -> dict[str, Any]:
        found: dict[str, Any] = planned.get(spec_digest(entry), {"dtypes": [], "claimed": {}, "applies": False})
        return found

    return Check(name=record["name"], contract=record["contract"], run=_not_imported, claim=record["claim"],
                 kinds=tuple(record["kinds"]), resource=record["resource"], version=record["version"],
                 applies=lambda e: part(e)["applies"], dtypes=lambda e: tuple(part(e)["dtypes"]),
                 dtype_claimed=lambda e, d: part(e)["claimed"].get(d, False))


def _not_imported(subject: object, case: object) -> None:
    """A stand-in's ``run``: the parent never runs a check (the workers import the real one)."""
    raise RuntimeError("a local check's stand-in cannot run: the worker imports the check itself")


def _read(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("entries"), dict) else None


def _source_digest(path: Path) -> str:
    """sha256 of the check's source and of the audit's own (what a declaration depends on)."""
    return hashlib.sha256(path.read_bytes() + audit_digest().encode()).hexdigest()[:32]

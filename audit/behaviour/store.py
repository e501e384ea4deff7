"""A behaviour record on disk: ``behaviour/manifest.json`` beside ``matrix.json``, and one tensor file per entry
under ``behaviour/entries/`` (torch's own format, read back with ``weights_only=True``: every dtype round-trips,
complex128 and the float8s included, and loading runs no code).

The manifest (``audit-behaviour/1``) holds the run's registry digest and seed, the environment and its numerics
settings, and per entry its record (:class:`~audit.behaviour.values.EntryRecord`) with its file's name, size and
sha256. The matrix names the manifest and every file's sha256 (its ``behaviour`` key). Reading checks all of it: a
missing or truncated file, a digest that does not match, another schema or another registry is a usage error that
says which, never a traceback. Size budget: :data:`BUDGET_BYTES` per entry file (a larger record is refused with
its size, and the entry says so), the fixed cases being small by construction.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.behaviour.values import EntryRecord
from audit.core.errors import UsageError
from audit.core.io import json_text, read_json

SCHEMA = "audit-behaviour/1"
FOLDER, MANIFEST = "behaviour", "manifest.json"
#: The most one entry's tensor file may hold (its outputs, gradients and state dict on the fixed cases).
BUDGET_BYTES = 16 << 20


@dataclass(frozen=True)
class Record:
    """A read record: its folder, what the run was (registry digest, seed, environment, numerics) and each entry's
    record with its tensor file."""

    folder: Path
    registry_sha256: str
    seed: int
    environment: dict[str, Any]
    numerics: dict[str, str]
    entries: dict[str, EntryRecord]
    files: dict[str, str] = field(default_factory=dict)
    #: Each entry's tensors once read (:meth:`tensors`).
    loaded: dict[str, dict] = field(default_factory=dict, init=False, compare=False, repr=False)

    def tensors(self, name: str) -> dict:
        """The tensors of entry ``name``, read once (torch is needed from here on; the manifest alone is read
        without it)."""
        import torch

        if name in self.loaded:
            return self.loaded[name]
        path = self.folder / self.files[name]
        try:
            self.loaded[name] = torch.load(path, weights_only=True)
        except Exception as exc:
            raise UsageError(f"{path}: cannot read this behaviour file ({type(exc).__name__}: {exc}); "
                             "record it again with audit run --record") from None
        return self.loaded[name]


def sha256(path: Path) -> str:
    """The file's sha256, in hex."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def manifest(registry_sha256: str, seed: int, environment: dict, numerics: dict, records: list[EntryRecord],
             files: dict[str, Path]) -> dict[str, Any]:
    """The manifest of a record whose entry files are ``files`` (entry name -> path inside the record's folder)."""
    entries = []
    for record in records:
        data = record.to_json()
        path = files.get(record.name)
        if path is not None:
            data.update(file=path.relative_to(path.parents[1]).as_posix(), sha256=sha256(path),
                        bytes=path.stat().st_size)
        entries.append(data)
    return {"schema": SCHEMA, "registry_sha256": registry_sha256, "seed": seed, "environment": environment,
            "numerics": numerics, "entries": entries}


def matrix_key(folder: Path) -> dict[str, Any]:
    """What the matrix says of a record in ``folder``: the manifest's path and sha256, and each file's."""
    data = read_json(str(folder / MANIFEST))
    return {"manifest": f"{FOLDER}/{MANIFEST}", "sha256": sha256(folder / MANIFEST),
            "files": {e["file"]: e["sha256"] for e in data["entries"] if "file" in e}}


def read(matrix_path: str, matrix_extra: dict[str, Any]) -> Record | None:
    """The record beside the matrix at ``matrix_path`` (None when the matrix names none), checked against the
    digests the matrix holds; a usage error saying what is wrong otherwise."""
    named = matrix_extra.get("behaviour")
    if not named:
        return None
    folder = Path(matrix_path).parent / FOLDER
    path = folder / MANIFEST
    if not path.is_file():
        raise UsageError(f"{matrix_path} names a behaviour record, but {path} is missing: copy the whole reports "
                         "folder, or record again with audit run --record")
    if sha256(path) != named.get("sha256"):
        raise UsageError(f"{path}: its sha256 is not the one {matrix_path} records: this record is not that run's "
                         "(or it was changed); record again with audit run --record")
    data = read_json(str(path))
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        found = data.get("schema") if isinstance(data, dict) else type(data).__name__
        raise UsageError(f"{path}: a behaviour record of another format ({found!r}; this audit reads {SCHEMA!r}): "
                         "record it again with this version (audit run --record)")
    files = {}
    for entry in data["entries"]:
        if "file" in entry:
            _check_file(folder, entry, named.get("files", {}))
            files[entry["name"]] = entry["file"]
    try:
        entries = {e["name"]: EntryRecord.from_json(e) for e in data["entries"]}
    except (KeyError, TypeError) as exc:
        raise UsageError(f"{path}: not a valid behaviour manifest ({type(exc).__name__}: {exc})") from None
    return Record(folder, data["registry_sha256"], data["seed"], data["environment"], data["numerics"], entries, files)


def _check_file(folder: Path, entry: dict, digests: dict) -> None:
    path = folder / entry["file"]
    if not path.is_file():
        raise UsageError(f"{path}: missing (entry {entry['name']!r} of the behaviour record): copy the whole "
                         "reports folder, or record again with audit run --record")
    size = path.stat().st_size
    if size != entry["bytes"]:
        raise UsageError(f"{path}: {size} bytes where the manifest records {entry['bytes']}: truncated or changed; "
                         "record again with audit run --record")
    if sha256(path) != entry["sha256"] or digests.get(entry["file"], entry["sha256"]) != entry["sha256"]:
        raise UsageError(f"{path}: its sha256 does not match the manifest's: changed since it was recorded; "
                         "record again with audit run --record")


def write_manifest(folder: Path, data: dict) -> None:
    """The manifest's text, sorted keys, into ``folder``."""
    (folder / MANIFEST).write_text(json_text(data), encoding="utf-8")

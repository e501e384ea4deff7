"""Files, in one place: written atomically, JSON read with an error that names the file, canonical JSON text,
and the UTC timestamp the matrix records."""

from __future__ import annotations

import datetime
import json
import os
import tempfile
from pathlib import Path

from audit.core.errors import OutputError, UsageError

#: How the matrix records when it was made (``created``): UTC, to the second.
TIMESTAMP = "%Y-%m-%dT%H:%M:%SZ"


def utc_timestamp() -> str:
    """Now, in UTC, as :data:`TIMESTAMP` writes it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime(TIMESTAMP)


def json_text(data) -> str:
    """Canonical JSON text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: never half-written. An OS error
    (read-only folder, full disk) becomes an :class:`OutputError` naming the path."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # what open() would have given, not mkstemp's 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise


def read_json(path: str):
    """The JSON document in ``path``, or a usage error that names the file and what is wrong with it
    (missing, unreadable, not JSON: with line and column)."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        return json.loads(file.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None

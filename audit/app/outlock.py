"""One writer per ``--out`` folder: a second run into the same folder is refused, not interleaved."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from audit.core.errors import OutputError, UsageError


@contextlib.contextmanager
def exclusive(folder: Path):
    """Hold an exclusive lock on ``folder`` (created if absent) while the block runs; refuse at once when
    another process holds it. The lock is the folder's own (``flock`` on its descriptor): nothing is
    left behind (a folder this call made and nothing filled is removed again), and a killed run releases
    it with its process. Where ``flock`` is absent (Windows),
    no lock is taken."""
    try:
        import fcntl
    except ImportError:
        yield
        return
    created = not folder.exists()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY)
    except OSError as exc:
        raise OutputError(f"cannot write {folder}: {exc.strerror or exc}") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageError(f"another audit is writing to {folder}: wait for it to finish, or give this run "
                             "its own --out") from None
        yield
    finally:
        os.close(fd)
        if created and not any(folder.iterdir()):  # refused or failed before writing: leave no trace
            folder.rmdir()

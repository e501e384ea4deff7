"""One temporary root per run: whatever the workers and ranks write goes under it, and it goes with the run.

The parent makes the root (:func:`run_root`) before it starts any worker and gives it to every worker as its
``TMPDIR`` (:func:`worker_env`), so that the Hypothesis home, the distributed ranks' rendezvous files and logs, and
any scratch a target makes with :mod:`tempfile` land there, through the workers' and ranks' own ``tempfile``. A
worker that is ended (retired, recycled, timed out, the run over) runs no clean-up of its own; the parent removes
the whole root on the way out, whatever ended the run (an exception, Ctrl-C, SIGTERM). A run killed with SIGKILL
cannot: its root holds a marker with its owner's pid and start time, and the next run removes every root whose
owner is gone (:func:`reclaim`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

#: How a run's root is named in the temporary folder (the owner's pid follows).
PREFIX = "autograd-audit-run-"
#: The file in a root that names its owner: ``pid start-time``.
MARKER = "owner"

_ROOT: list[str] = []


@contextlib.contextmanager
def run_root() -> Iterator[str]:
    """The run's temporary root, made now (after removing the roots of killed runs) and removed on the way out;
    inside another run's (a command that calls the engine), that one."""
    if _ROOT:
        yield _ROOT[0]
        return
    reclaim()
    root = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")
    Path(root, MARKER).write_text(_identity(os.getpid()))
    _ROOT.append(root)
    try:
        yield root
    finally:
        _ROOT.clear()
        shutil.rmtree(root, ignore_errors=True)


def current() -> str | None:
    """The root of the run in progress in this process (None outside one)."""
    return _ROOT[0] if _ROOT else None


def worker_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the temporary folder of a worker (and of what it starts) moved under the run's root."""
    root = current()
    return {**env, "TMPDIR": root, "TEMP": root, "TMP": root} if root else env


def reclaim(folder: str | None = None) -> list[str]:
    """Remove the roots in ``folder`` (the temporary folder) whose owner no longer runs; the paths removed."""
    removed = []
    for path in sorted(Path(folder or tempfile.gettempdir()).glob(f"{PREFIX}*")):
        if path.is_dir() and not _owner_runs(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
    return removed


def _owner_runs(root: Path) -> bool:
    """Whether the process that made ``root`` still runs (the same pid, started at the same time: not a later
    process given the pid again)."""
    try:
        owner = (root / MARKER).read_text().split()
    except OSError:  # no marker: made an instant ago, the marker not yet written (the pid is in the name too)
        owner = [root.name.removeprefix(PREFIX).partition("-")[0]]
    if not owner or not owner[0].isdigit():
        return True  # not a root this audit made: not ours to remove
    pid = int(owner[0])
    return _running(pid) and (len(owner) < 2 or _started(pid) == owner[1])


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it runs
        return True
    return True


def _identity(pid: int) -> str:
    """What the marker holds: ``pid start-time`` (only the pid where the start time cannot be read)."""
    return f"{pid} {_started(pid)}".strip()


def _started(pid: int) -> str:
    """When ``pid`` started, in clock ticks since boot (``/proc``; "" elsewhere): it tells a process from a later
    one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
        return data[data.rfind(b")") + 2:].split()[19].decode()
    except (OSError, IndexError):
        return ""

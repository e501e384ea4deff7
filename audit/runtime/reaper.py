"""Every process a cell starts ends with the cell.

Workers and distributed ranks each lead a process group of their own (:func:`audit.runtime.channel.spawn`):
what the code under audit starts (a subprocess, a pool, a server) joins that group. A child started in a new
session (``start_new_session=True``, ``setsid``) leaves the group, and a double-forked daemon leaves its
parent too; so on Linux a worker is also a child subreaper (``prctl(PR_SET_CHILD_SUBREAPER)``): an orphan
among its descendants is re-parented to it, not to init, and stays in its process tree. After each cell the
worker or rank ends every other member of its group and every descendant it does not keep (the distributed
ranks, :func:`keep`); a worker or rank that is closed takes its group and its whole tree with it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys

#: prctl's option that makes a process its descendants' reaper, and the one that names the signal it gets when its
#: parent dies (linux/prctl.h).
PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
#: Processes this process started on purpose and keeps across cells (the distributed ranks), with their trees.
_KEPT: set[int] = set()


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux); whether it is one now."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def die_with_parent() -> bool:
    """Ask Linux to kill this process when its parent dies (a run killed with SIGKILL ends no worker itself: one
    busy in a hung cell would run on, and write on, for ever); whether it will be."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        asked = libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # the parent died before the request: nothing will send the signal
        os._exit(1)
    return asked


def keep(pid: int) -> None:
    """``pid`` (and what it starts) is this process's own, not a cell's: :func:`end_strays` leaves it alone."""
    _KEPT.add(pid)


def release(pid: int) -> None:
    """``pid`` is no longer kept (it is being ended)."""
    _KEPT.discard(pid)


def parents() -> dict[int, int]:
    """Every visible process's parent, from ``/proc/PID/stat`` (empty where there is no ``/proc``)."""
    found: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return found
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                data = stat.read()
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        if len(fields) > 1:
            found[int(name)] = int(fields[1])
    return found


def descendants(roots, of: dict[int, int] | None = None) -> set[int]:
    """Every process below ``roots`` in the process tree (the roots themselves not included)."""
    of = parents() if of is None else of
    children: dict[int, list[int]] = {}
    for pid, parent in of.items():
        children.setdefault(parent, []).append(pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def end_strays() -> int:
    """Kill every other process of this process's group and every descendant it does not keep, when it leads a
    group (a worker or a rank; read from /proc, Linux); how many it killed."""
    me = os.getpid()
    if not hasattr(os, "getpgid") or os.getpgid(0) != me or not os.path.isdir("/proc"):
        return 0
    _shut_compile_workers()
    killed = 0
    for _ in range(3):  # a stray that forked while it was being found is found in the next round
        tree = parents()
        kept = _KEPT | descendants(_KEPT, tree)
        victims = {pid for pid in descendants([me], tree) if pid not in kept}
        victims |= {pid for pid in tree if pid != me and pid not in kept and _group(pid) == me}
        if not victims:
            break
        killed += _kill(victims)
        _reap()
    return killed


def _group(pid: int) -> int:
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return -1


def _kill(pids, sig: int = signal.SIGKILL) -> int:
    done = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            done += 1
        except (ProcessLookupError, PermissionError):
            continue
    return done


def _shut_compile_workers() -> None:
    """Inductor's compile-worker pool is the audit's, not the target's: shut it down cleanly (the next
    compile starts a new one) rather than leave it to be killed under torch's feet."""
    import sys

    async_compile = sys.modules.get("torch._inductor.async_compile")
    if async_compile is not None and hasattr(async_compile, "shutdown_compile_workers"):
        with contextlib.suppress(Exception):  # a pool that cannot shut down is killed with the rest
            async_compile.shutdown_compile_workers()


def end_group(process) -> None:
    """Kill ``process`` (a ``subprocess.Popen`` that leads its group), everything left in its group, and every
    process below it in the tree (what it started in other sessions; with a subreaper, orphans too). The tree
    is frozen first (SIGSTOP), so that nothing in it starts another process while it is being found."""
    if process.poll() is None and os.path.isdir("/proc"):
        tree: set[int] = set()
        for _ in range(3):
            found = descendants([process.pid]) | {process.pid}
            _kill(found - tree, signal.SIGSTOP)
            if found <= tree:
                break
            tree |= found
        _kill(tree)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        if process.poll() is None:
            process.kill()
    process.wait()


def _reap() -> None:
    """Collect the exit status of any child that ended, so none lingers as a zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return

"""Every process a cell starts ends with the cell.

Workers and distributed ranks each lead a process group of their own (:func:`audit.runtime.channel.spawn`):
what the code under audit starts (a subprocess, a pool, a server) joins that group. After each cell the
worker or rank ends every other member of its group, and a worker or rank that is closed takes its whole
group with it.
"""

from __future__ import annotations

import os
import signal


def end_strays() -> int:
    """Kill every other process of this process's group, when it leads one (read from /proc, Linux);
    how many it killed. The ranks lead groups of their own and are left alone."""
    me = os.getpid()
    if not hasattr(os, "getpgid") or os.getpgid(0) != me or not os.path.isdir("/proc"):
        return 0
    _shut_compile_workers()
    killed = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        try:
            if os.getpgid(int(name)) == me:
                os.kill(int(name), signal.SIGKILL)
                killed += 1
        except (ProcessLookupError, PermissionError):
            continue
    _reap()
    return killed


def _shut_compile_workers() -> None:
    """Inductor's compile-worker pool is the audit's, not the target's: shut it down cleanly (the next
    compile starts a new one) rather than leave it to be killed under torch's feet."""
    import sys

    async_compile = sys.modules.get("torch._inductor.async_compile")
    if async_compile is not None and hasattr(async_compile, "shutdown_compile_workers"):
        try:
            async_compile.shutdown_compile_workers()
        except Exception:  # a pool that cannot shut down is killed with the rest
            pass


def end_group(process) -> None:
    """Kill ``process`` (a ``subprocess.Popen`` that leads its group) and everything left in its group."""
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

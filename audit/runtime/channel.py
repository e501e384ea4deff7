"""A child Python process and the two pipes the audit talks to it over.

The protocol has pipes of its own, never the child's stdout: whatever the code under audit prints
(100 MB of debugging output, a stray newline) goes to the child's log and cannot corrupt a message.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Protocol

#: How much of the end of a child's log is read to quote its last lines.
TAIL_BYTES = 64 << 10


class Process(Protocol):
    """What the audit uses of a child process: a :class:`subprocess.Popen`, or a :class:`Forked` child."""

    @property
    def pid(self) -> int:
        """The child's process id."""

    def poll(self) -> int | None:
        """The exit code once the child ended, None while it runs."""

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end; its exit code."""

    def kill(self) -> None:
        """SIGKILL the child."""


@dataclass(frozen=True)
class Child:
    """A started child: its process, the pipe to it and the pipe from it."""

    process: Process
    outbox: Connection
    inbox: Connection


def spawn(module: str, args: list[str], *, env: dict, log) -> Child:
    """Start ``python -m module READ_FD WRITE_FD *args`` (see :func:`connect`) as the leader of a process
    group of its own (what it starts can be ended with it: :mod:`audit.runtime.reaper`); its stdout and
    stderr go to ``log``, an open file."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    command = [sys.executable, "-m", module, str(to_child_r), str(from_child_w), *args]
    process = subprocess.Popen(command, pass_fds=(to_child_r, from_child_w), stdin=subprocess.DEVNULL,
                               stdout=log, stderr=log, env=env, start_new_session=True)  # its own group: see reaper
    os.close(to_child_r)
    os.close(from_child_w)
    return Child(process, Connection(to_child_w, readable=False), Connection(from_child_r, writable=False))


def fork(run, *, env: dict, log) -> Child:
    """Fork this process into a child that calls ``run(inbox, outbox)`` and exits with what it returns: as
    :func:`spawn`, but with what this process has imported already there (no second ``import torch``).

    Only for a process that has run nothing of a target's yet (a worker at start-up): the child should not
    inherit threads, locks or state a target left. Like a spawned child it leads a session of its own, writes
    to ``log``, sets ``env`` in its environment, and keeps no other descriptor of this process."""
    to_child_r, to_child_w = os.pipe()
    from_child_r, from_child_w = os.pipe()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        _child(run, env, log, to_child_r, from_child_w)
    os.close(to_child_r)
    os.close(from_child_w)
    return Child(Forked(pid), Connection(to_child_w, readable=False), Connection(from_child_r, writable=False))


def _child(run, env: dict, log, inbox: int, outbox: int) -> None:
    code = 1
    try:
        os.setsid()  # its own group: see reaper
        os.dup2(log.fileno(), 1)
        os.dup2(log.fileno(), 2)
        _close_all_but(0, 1, 2, inbox, outbox)
        os.environ.update(env)
        code = run(Connection(inbox, writable=False), Connection(outbox, readable=False))
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # a stream closed under it: nothing more to say
                stream.flush()
        os._exit(code if isinstance(code, int) else 1)  # no atexit handler or finalizer of the parent's


def _close_all_but(*keep: int) -> None:
    """Close every descriptor but ``keep`` (the parent's pipes and files are not the child's)."""
    low = 0
    for fd in sorted(set(keep)) + [os.sysconf("SC_OPEN_MAX")]:
        if fd > low:  # os.closerange(n, n) closes every descriptor from n up (Python 3.11, Linux close_range)
            os.closerange(low, fd)
        low = fd + 1


class Forked:
    """A forked child, with the part of :class:`subprocess.Popen` the audit uses: ``pid``, ``returncode``,
    ``poll()``, ``wait()`` and ``kill()``."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        """The exit code once the child ended (reaping it), None while it runs."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else (the reaper's sweep): as Popen, code unknown
                self.returncode = 0
            else:
                if pid:
                    self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the child to end (at most ``timeout`` s: then :class:`subprocess.TimeoutExpired`)."""
        start = time.monotonic()
        while (code := self.poll()) is None:
            if timeout is not None and time.monotonic() > start + timeout:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.01)
        return code

    def kill(self) -> None:
        """SIGKILL the child, if it still runs."""
        if self.poll() is None:
            os.kill(self.pid, signal.SIGKILL)


def connect(argv: list[str]) -> tuple[Connection, Connection]:
    """In the child: (inbox, outbox), from the two descriptors :func:`spawn` put first on its command line."""
    return Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)


class _Tail:
    """A text stream that passes on only the end of each write (:data:`TAIL_BYTES` characters): a target that
    prints megabytes per call costs the process next to nothing, and the log still ends with its last lines."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(text[-TAIL_BYTES:] if len(text) > TAIL_BYTES else text)
        return len(text)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def keep_tails() -> None:
    """In a child: ``sys.stdout`` and ``sys.stderr`` keep only the end of each write (see :class:`_Tail`)."""
    sys.stdout, sys.stderr = _Tail(sys.stdout), _Tail(sys.stderr)


def tail(log, lines: int) -> list[str]:
    """The last ``lines`` non-empty lines of an open binary ``log`` (only its end is read)."""
    log.flush()
    size = log.seek(0, os.SEEK_END)
    log.seek(max(0, size - TAIL_BYTES))
    text = log.read().decode(errors="replace")
    return [line for line in text.strip().splitlines() if line.strip()][-lines:]

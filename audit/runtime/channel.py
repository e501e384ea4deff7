"""A child Python process and the two pipes the audit talks to it over.

The protocol has pipes of its own, never the child's stdout: whatever the code under audit prints
(100 MB of debugging output, a stray newline) goes to the child's log and cannot corrupt a message.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from multiprocessing.connection import Connection

#: How much of the end of a child's log is read to quote its last lines.
TAIL_BYTES = 64 << 10


@dataclass(frozen=True)
class Child:
    """A started child: its process, the pipe to it and the pipe from it."""

    process: subprocess.Popen
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


def connect(argv: list[str]) -> tuple[Connection, Connection]:
    """In the child: (inbox, outbox), from the two descriptors :func:`spawn` put first on its command line."""
    return Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)


def tail(log, lines: int) -> list[str]:
    """The last ``lines`` non-empty lines of an open binary ``log`` (only its end is read)."""
    log.flush()
    size = log.seek(0, os.SEEK_END)
    log.seek(max(0, size - TAIL_BYTES))
    text = log.read().decode(errors="replace")
    return [line for line in text.strip().splitlines() if line.strip()][-lines:]

"""The commands stages run: each in a process group of its own, its output in a log file, stopped with everything
it started when its time is up (SIGTERM first, which the audit and pytest unwind from, then SIGKILL)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

#: Seconds a stopped command has between SIGTERM and SIGKILL.
STOPPING = 10.0
#: Seconds between looks at running commands.
POLL = 0.2


@dataclass(frozen=True)
class Command:
    """An argument vector and the file its output goes to."""

    argv: tuple[str, ...]
    log: Path

    def __str__(self) -> str:
        return " ".join(self.argv)


@dataclass(frozen=True)
class Finished:
    """How a command ended: its exit code, None when it was stopped at its time limit or never started."""

    returncode: int | None
    seconds: float
    started: bool = True

    @property
    def timed_out(self) -> bool:
        """It was started, and stopped at its time limit."""
        return self.started and self.returncode is None


def run(command: Command, timeout: float, *, cwd: Path, env: dict) -> Finished:
    """Run one command for at most ``timeout`` seconds."""
    return run_all([command], timeout, parallel=1, cwd=cwd, env=env)[0]


def run_all(commands: list[Command], timeout: float, *, parallel: int, cwd: Path, env: dict) -> list[Finished]:
    """Run ``commands``, ``parallel`` at a time, all within ``timeout`` seconds from now, in order of the list:
    those still running then are stopped, those not started by then never are."""
    deadline = time.monotonic() + timeout
    waiting, running, done = deque(enumerate(commands)), {}, {}
    while waiting or running:
        while waiting and len(running) < parallel and time.monotonic() < deadline:
            index, command = waiting.popleft()
            running[index] = _Running(command, cwd, env)
        for index in [i for i, r in running.items() if r.process.poll() is not None]:
            done[index] = running.pop(index).finished()
        if time.monotonic() >= deadline:
            done.update({index: r.stop() for index, r in running.items()})
            done.update({index: Finished(None, 0.0, started=False) for index, _ in waiting})
            break
        time.sleep(POLL)
    return [done[index] for index in range(len(commands))]


def tail(log: Path, lines: int = 25) -> str:
    """The last ``lines`` lines of a log ("" when it cannot be read)."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


class _Running:
    """A started command."""

    def __init__(self, command: Command, cwd: Path, env: dict):
        command.log.parent.mkdir(parents=True, exist_ok=True)
        self.start = time.monotonic()
        with open(command.log, "wb") as log:
            self.process = subprocess.Popen(command.argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True)

    def finished(self) -> Finished:
        return Finished(self.process.returncode, time.monotonic() - self.start)

    def stop(self) -> Finished:
        """SIGTERM to its process group; after :data:`STOPPING` seconds, SIGKILL to whatever is left in it."""
        _signal_group(self.process.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOPPING)
        _signal_group(self.process.pid, signal.SIGKILL)
        self.process.wait()
        return Finished(None, time.monotonic() - self.start)


def _signal_group(pid: int, sign: int) -> None:
    with contextlib.suppress(ProcessLookupError):  # the whole group has ended
        os.killpg(pid, sign)

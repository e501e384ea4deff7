"""The distributed check's rank processes: a pair of ranks (DistributedDataParallel, gloo on loopback) that serves
every cell and example of a worker (:mod:`audit.checks.distributed`).

Each cell's entry is loaded in the ranks on first use. In a run, the worker that holds every distributed cell forks
its pair at start-up, before it loads any target (:func:`prefork_ranks`: milliseconds, the torch import shared);
elsewhere (a cell run in this process, a pair that failed) a pair is started on first use, which costs two torch
imports (start-up work, timed on the worker's start-up budget rather than the check's ``--timeout``). A rank that
errors, dies or does not answer within the timeout raises :class:`Violation` and both ranks are ended (a fresh pair
serves what comes next); at the end of the worker's life the ranks end with it.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
from multiprocessing.connection import wait
from pathlib import Path

from audit.core.violation import Violation
from audit.kit.ddp import RANK_ENV
from audit.runtime.channel import fork, spawn, tail
from audit.runtime.ddp_rank import serve
from audit.runtime.rank_messages import Gradients, GradientsRequest, RankError, RankSpec
from audit.runtime.reaper import end_group, keep, release
from audit.runtime.startup import starting

#: Ranks in a pair: the world size of every distributed example.
WORLD = 2
#: What a rank imports to answer its first request (DistributedDataParallel imports Dynamo: about 2 s): a worker
#: imports it before forking its ranks, so that they share it (the worker's compile and export cells need it too).
RANK_IMPORTS = ("torch._dynamo", "torch.nn.parallel", "audit.runtime.subject", "audit.runtime.target",
                "audit.runtime.isolation", "audit.inputs.case", "audit.toolkit.ddp", "audit.kit.ddp")
#: Seconds a rank may take to start (import torch, join the group), and to answer (loading an entry on first use).
START_TIMEOUT = 120.0
ANSWER_TIMEOUT = 60.0


class Ranks:
    """A pair of rank processes, each with its own pipes (never stdout: see :mod:`audit.runtime.channel`);
    ``close()`` ends them."""

    def __init__(self, forked: bool = False):
        """``forked``: fork the ranks from this process (see :func:`prefork_ranks`) rather than start them."""
        self.folder = Path(tempfile.mkdtemp(prefix="audit-ddp-"))
        # Append mode: the ranks write at the end even after this process reads the tail.
        self.logs = [open(self.folder / f"rank{rank}.log", "a+b") for rank in range(WORLD)]  # noqa: SIM115 (closed by close())
        self.forked = forked
        self.children = [self._start(rank, log, forked) for rank, log in enumerate(self.logs)]
        for child in self.children:  # the worker's own, across cells: not a cell's stray
            keep(child.process.pid)
        self.specs: dict[tuple, str] = {}
        self.joined = False

    def _start(self, rank: int, log, forked: bool):
        init = str(self.folder / "init")
        if forked:
            return fork(lambda inbox, outbox: serve(inbox, outbox, rank, WORLD, init, ANSWER_TIMEOUT), env=RANK_ENV,
                        log=log)
        return spawn("audit.runtime.ddp_rank", [str(rank), str(WORLD), init, str(ANSWER_TIMEOUT)],
                     env={**os.environ, **RANK_ENV}, log=log)

    def join(self) -> None:
        """Wait until every rank has joined the process group (start-up: not on the check's clock)."""
        with starting("starting the distributed ranks"):
            self._read_all(START_TIMEOUT, "join the process group")
        self.joined = True

    def spec(self, subject) -> str:
        """The file the ranks load this cell's entry from (written once per cell)."""
        key = (subject.entry.name, subject.entry.target, subject.dtype, subject.seed, id(subject))
        if key not in self.specs:
            path = self.folder / f"cell{len(self.specs)}.pickle"
            path.write_bytes(pickle.dumps(RankSpec(subject.entry, subject.options.base, subject.dtype,
                                                   subject.seed)))
            self.specs[key] = str(path)
        return self.specs[key]

    def alive(self) -> bool:
        """Whether both ranks still run."""
        return all(c.process.poll() is None for c in self.children)

    def ask(self, request: GradientsRequest) -> list[Gradients]:
        """Every rank's answer to ``request``; raises :class:`Violation` on an error, a hang or a death."""
        for rank, child in enumerate(self.children):
            try:
                child.outbox.send(request)
            except OSError:
                raise Violation(f"rank {rank} died (exit code {child.process.wait()}){self._log(rank)}") from None
        return self._read_all(ANSWER_TIMEOUT, "answer")

    def _read_all(self, timeout: float, doing: str) -> list:
        answers: dict = {}
        deadline = time.monotonic() + timeout
        while len(answers) < WORLD:
            waiting = {self.children[r].inbox: r for r in range(WORLD) if r not in answers}
            ready = wait(list(waiting), timeout=max(0.0, deadline - time.monotonic()))
            if not ready:
                missing = min(waiting.values())
                raise Violation(f"rank {missing} did not {doing} within {timeout:.0f} s: a hang in a "
                                f"collective or in the entry{self._log(missing)}")
            for inbox in ready:
                rank = waiting[inbox]
                try:
                    answers[rank] = self.children[rank].inbox.recv()
                except (EOFError, OSError):
                    raise Violation(f"rank {rank} died (exit code {self.children[rank].process.wait()})"
                                    f"{self._log(rank)}") from None
                if isinstance(answers[rank], RankError):
                    raise Violation(f"rank {rank} raised {answers[rank].error}")
        return [answers[r] for r in range(WORLD)]

    def _log(self, rank: int) -> str:
        last = tail(self.logs[rank], 1)
        return f"; its last output: {last[-1][:300]}" if last else ""

    @property
    def pids(self) -> list[int]:
        """The rank processes' ids."""
        return [c.process.pid for c in self.children]

    def close(self) -> None:
        """End every rank (politely, then not) and remove the rendezvous folder."""
        for child in self.children:
            child.outbox.close()
        deadline = time.monotonic() + 5
        for child in self.children:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            release(child.process.pid)
            end_group(child.process)  # and whatever the target started in it
            child.inbox.close()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_SHARED: dict[str, Ranks] = {}


def shared_ranks() -> Ranks:
    """This process's pair of ranks, started on first use (or again after one failed), or forked at start-up."""
    ranks = _SHARED.get("ranks")
    if ranks is not None and ranks.forked and not ranks.joined:
        try:
            ranks.join()
        except Violation:  # the forked pair never joined: the audit's setback, not the entry's; start a pair
            close_ranks()
            ranks = None
    if ranks is None or not ranks.alive():
        if ranks is not None:
            ranks.close()
        ranks = _SHARED["ranks"] = Ranks()
        atexit.register(close_ranks)
    if not ranks.joined:
        ranks.join()
    return ranks


def prefork_ranks() -> None:
    """Fork this process's pair of ranks now. Called by the worker that holds a run's distributed cells, at its
    start, before it loads any target: a forked rank shares the torch the worker imported instead of importing
    its own (two imports, seconds each), and inherits no target's state. A pair that fails later is replaced
    by started ones, as in any other process, and so is a forked pair that does not join. Linux only: elsewhere
    (macOS) forking a process that loaded torch's libraries is not safe, and ranks are started on first use."""
    if "ranks" not in _SHARED and sys.platform.startswith("linux"):
        for module in RANK_IMPORTS:  # imported once, here, rather than by each rank on its first request
            importlib.import_module(module)
        _SHARED["ranks"] = Ranks(forked=True)
        atexit.register(close_ranks)


def close_ranks() -> None:
    """End this process's ranks, if any."""
    ranks = _SHARED.pop("ranks", None)
    if ranks is not None:
        ranks.close()

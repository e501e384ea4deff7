"""``distributed``: under DistributedDataParallel (2 CPU ranks, gloo on loopback) the synchronised
gradients of a batch split across ranks equal one process's gradients on the whole batch.

One pair of ranks starts with the first distributed cell of a worker and serves every later cell and
example (each cell's entry is loaded in the ranks on first use): starting them costs about 2 s, an
example a few milliseconds. A rank that errors, dies or does not answer within the timeout fails the
example and both ranks are ended (a fresh pair serves what comes next); at the end of the worker's life
the ranks end with it.
"""

from __future__ import annotations

import atexit
import json
import os
import pickle
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from audit.checks import ddp
from audit.checks.interface import Check, NotApplicable, Violation
from audit.checks.tensors import mismatch

WORLD = 2
#: Seconds a rank may take to start (import torch, load the entry, join the group) and to answer.
START_TIMEOUT = 120.0
ANSWER_TIMEOUT = 60.0


class Ranks:
    """A pair of rank processes; ``close()`` ends them."""

    def __init__(self):
        self.folder = Path(tempfile.mkdtemp(prefix="audit-ddp-"))
        env = {**os.environ, "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
        self.processes = [subprocess.Popen(
            [sys.executable, "-m", "audit.checks.ddp_rank", str(rank), str(WORLD), str(self.folder / "init"),
             str(ANSWER_TIMEOUT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(self.folder / f"rank{rank}.log", "w"), text=True, env=env) for rank in range(WORLD)]
        self.started = False
        self.specs: dict[tuple, str] = {}

    def spec(self, subject) -> str:
        """The file the ranks load this cell's entry from (written once per cell)."""
        key = (subject.entry.name, subject.entry.target, subject.dtype, subject.seed, id(subject))
        if key not in self.specs:
            path = self.folder / f"cell{len(self.specs)}.pickle"
            path.write_bytes(pickle.dumps({"entry": subject.entry, "base": subject.options.base,
                                           "dtype": subject.dtype, "seed": subject.seed}))
            self.specs[key] = str(path)
        return self.specs[key]

    def alive(self) -> bool:
        """Whether both ranks still run."""
        return all(p.poll() is None for p in self.processes)

    def ask(self, request: dict) -> list[dict]:
        """Every rank's answer to ``request``; raises :class:`Violation` on an error, a hang or a death."""
        line = json.dumps(request) + "\n"
        for process in self.processes:
            process.stdin.write(line)
            process.stdin.flush()
        timeout = ANSWER_TIMEOUT + (0 if self.started else START_TIMEOUT)
        answers = self._read_all(timeout)
        self.started = True
        return answers

    def _read_all(self, timeout: float) -> list[dict]:
        answers: dict[int, dict] = {}
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            for rank, process in enumerate(self.processes):
                selector.register(process.stdout, selectors.EVENT_READ, rank)
            while len(answers) < WORLD:
                left = deadline - time.monotonic()
                events = selector.select(timeout=max(0.0, left)) if left > 0 else []
                if not events:
                    missing = [r for r in range(WORLD) if r not in answers]
                    raise Violation(f"rank {missing[0]} did not answer within {timeout:.0f} s: a hang in a "
                                    f"collective or in the entry{self._log(missing[0])}")
                for key, _ in events:
                    rank = key.data
                    text = self.processes[rank].stdout.readline()
                    selector.unregister(self.processes[rank].stdout)
                    if not text:
                        raise Violation(f"rank {rank} died (exit code {self.processes[rank].wait()}){self._log(rank)}")
                    answers[rank] = json.loads(text)
                    if not answers[rank]["ok"]:
                        raise Violation(f"rank {rank} raised {answers[rank]['error']}")
        return [answers[r] for r in range(WORLD)]

    def _log(self, rank: int) -> str:
        try:
            lines = (self.folder / f"rank{rank}.log").read_text().strip().splitlines()
        except OSError:
            return ""
        return f"; its last output: {lines[-1][:300]}" if lines else ""

    @property
    def pids(self) -> list[int]:
        """The rank processes' ids."""
        return [p.pid for p in self.processes]

    def close(self) -> None:
        """End every rank (politely, then not) and remove the rendezvous folder."""
        for process in self.processes:
            try:
                process.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + 5
        for process in self.processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


_SHARED: dict[str, Ranks] = {}


def shared_ranks() -> Ranks:
    """This process's pair of ranks, started on first use (or again after one failed)."""
    ranks = _SHARED.get("ranks")
    if ranks is None or not ranks.alive():
        if ranks is not None:
            ranks.close()
        ranks = _SHARED["ranks"] = Ranks()
        atexit.register(close_ranks)
    return ranks


def close_ranks() -> None:
    """End this process's ranks, if any."""
    ranks = _SHARED.pop("ranks", None)
    if ranks is not None:
        ranks.close()


def run(subject, case) -> None:
    """Whole batch in this process against the ranks' synchronised gradients."""
    if subject.device != "cpu":
        raise NotApplicable("the distributed check runs CPU ranks with gloo; NCCL on GPUs is not covered")
    dim = ddp.batch_dim(subject.entry, WORLD)
    if dim is None:
        raise NotApplicable(f"no floating input has a symbolic dim that reaches {WORLD}: nothing to split a "
                            "batch along")
    case = ddp.even(subject.entry, case, dim, WORLD)
    args = subject.args(case)
    axes = ddp.batched_axes(subject.entry, dim)
    reference = ddp.Harness(subject.target.fn, args, axes)
    if not list(reference.parameters()):
        raise NotApplicable("no input requires a gradient: nothing for DistributedDataParallel to synchronise")
    reference(*ddp.data(args, axes)).backward()
    expected = ddp.gradients(reference)
    ranks = shared_ranks()
    subject.metrics["world"] = WORLD
    try:
        answers = ranks.ask({"spec": ranks.spec(subject), "case": case.to_json(), "dim": dim})
    except Violation:
        close_ranks()  # a fresh pair serves the next example
        raise
    tol = subject.tolerance()
    for rank, answer in enumerate(answers):
        for name, grad in expected.items():
            got = torch.tensor(answer["grads"][name], dtype=torch.float64)
            problem = mismatch(got, torch.tensor(grad, dtype=torch.float64), tol)
            if problem:
                what = f"scale of input {name}" if int(name) in axes else f"input {name} (as a parameter)"
                raise Violation(f"rank {rank}: DDP gradient of the {what}, batch split along {dim} over {WORLD} "
                                f"ranks, differs from one process on the whole batch: {problem}; a forward or "
                                "backward that keeps per-process state (batch statistics, buffers) needs a "
                                "collective")


CHECK = Check(
    name="distributed",
    contract="under DistributedDataParallel (2 CPU ranks, gloo, loopback) with a batch split across ranks, the "
             "synchronised gradients equal one process's on the whole batch, and no rank errors or hangs; "
             "claimed through supports.distributed",
    run=run,
    claimed=lambda entry: entry.supports.distributed,
    claim="supports.distributed",
    script="""\
# Two ranks with gloo: run this file twice, with RANK=0 and RANK=1 (and MASTER_ADDR=127.0.0.1 MASTER_PORT=29500).
import os
import torch.distributed as dist
dist.init_process_group("gloo", rank=int(os.environ["RANK"]), world_size=2)
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
out = fn(*args)
outs = out if isinstance(out, (tuple, list)) else (out,)
sum((o ** 2).sum() / 2 for o in outs).backward()
print("rank", dist.get_rank(), [a.grad for a in diff])
""",
)

"""``distributed``: under DistributedDataParallel (2 CPU ranks, gloo on loopback) the synchronised
gradients of a batch split across ranks equal one process's gradients on the whole batch.

One pair of ranks serves every cell and example of a worker (each cell's entry is loaded in the ranks on
first use). In a run, one worker holds every distributed cell and forks its pair at start-up, before it loads
any target (:func:`prefork_ranks`: milliseconds, the torch import shared); elsewhere (a cell run in this
process, a pair that failed) a pair is started on first use, which costs two torch imports (start-up work,
timed on the worker's start-up budget rather than the check's ``--timeout``). An example takes a few
milliseconds. A rank that errors, dies or does not answer within the timeout fails the
example and both ranks are ended (a fresh pair serves what comes next); at the end of the worker's life
the ranks end with it.
"""

from __future__ import annotations

import atexit
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

import torch

from audit.checks.catalog import declared
from audit.checks.interface import NotApplicable, Violation, tolerance_values
from audit.contract import COMPLEX_DTYPES
from audit.runtime.channel import fork, spawn, tail
from audit.runtime.ddp_rank import serve
from audit.runtime.rank_messages import Gradients, GradientsRequest, RankError, RankSpec
from audit.runtime.reaper import end_group, keep, release
from audit.runtime.startup import starting
from audit.toolkit import ddp
from audit.toolkit.tensors import mismatch

WORLD = 2
#: What a rank's environment adds: gloo on the loopback interface, one thread.
RANK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}
#: What a rank imports to answer its first request (DistributedDataParallel imports Dynamo: about 2 s): a worker
#: imports it before forking its ranks, so that they share it (the worker's compile and export cells need it too).
RANK_IMPORTS = ("torch._dynamo", "torch.nn.parallel", "audit.runtime.subject", "audit.runtime.target",
                "audit.runtime.isolation", "audit.inputs.case", "audit.toolkit.ddp")
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
        self.logs = [open(self.folder / f"rank{rank}.log", "a+b") for rank in range(WORLD)]
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
        answers: dict[int, object] = {}
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
                    answers[rank] = inbox.recv()
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
            try:
                child.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
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


def run(subject, case) -> None:
    """Whole batch in this process against the ranks' synchronised gradients."""
    if subject.dtype in COMPLEX_DTYPES:
        raise NotApplicable("the distributed check drives DistributedDataParallel with a real loss (half the sum "
                            "of squared outputs) and compares gradients gathered as float64 lists: complex "
                            "entries are not covered (their gradients are checked in one process)")
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
    subject.metrics["world"] = WORLD
    try:
        ranks = shared_ranks()
        answers = ranks.ask(GradientsRequest(ranks.spec(subject), case.to_json(), dim))
    except Violation:
        close_ranks()  # a fresh pair serves the next example
        raise
    tol = subject.tolerance()
    for rank, answer in enumerate(answers):
        for name, grad in expected.items():
            got = torch.tensor(answer.grads[name], dtype=torch.float64)
            problem = mismatch(got, torch.tensor(grad, dtype=torch.float64), tol)
            if problem:
                what = f"scale of input {name}" if int(name) in axes else f"input {name} (as a parameter)"
                raise Violation(f"rank {rank}: DDP gradient of the {what}, batch split along {dim} over {WORLD} "
                                f"ranks, differs from one process on the whole batch: {problem}; a forward or "
                                "backward that keeps per-process state (batch statistics, buffers) needs a "
                                "collective")


def _script_values(subject, case) -> dict:
    """The comparison, the axis of the split dim per input, and the case as split (that dim made even)."""
    entry, dim = subject.entry, ddp.batch_dim(subject.entry, WORLD)
    if dim is None:
        return {}
    return {**tolerance_values(subject, case), "axes": ddp.batched_axes(entry, dim),
            "even_args": ddp.even(entry, case, dim, WORLD)}


SCRIPT = """\
# Forks its 2 gloo ranks (on the loopback interface) from this process: python this_file, nothing else (Linux).
# even_args: the case with the split dim made a multiple of 2; axes: input -> the axis it is split along.
import datetime
import multiprocessing
import os
import queue
import tempfile
import traceback

import torch._dynamo  # DistributedDataParallel imports it: once here rather than in each forked rank
import torch.distributed as dist

WORLD = 2


class Harness(torch.nn.Module):
    \"\"\"The target with parameters, as the audit trains it: an input with the batch dim is data times a learnable
    scale (1 along the batch), one without it is a parameter; the loss is sum(out ** 2) / 2 over floating outputs.\"\"\"

    def __init__(self, xs):
        super().__init__()
        self.template, self.weights = list(xs), torch.nn.ParameterDict()
        for i, x in enumerate(xs):
            if torch.is_tensor(x) and x.requires_grad:
                shape = [1 if k == axes.get(i) else n for k, n in enumerate(x.shape)]
                self.weights[str(i)] = torch.nn.Parameter(
                    torch.ones(shape, dtype=x.dtype, device=x.device) if i in axes else x.detach().clone())

    def forward(self, *data):
        it, xs = iter(data), []
        for i, x in enumerate(self.template):
            x = next(it) if i in axes else x
            if str(i) in self.weights:
                x = x * self.weights[str(i)] if i in axes else self.weights[str(i)]
            xs.append(x)
        out = _target(*xs)
        outs = [out] if torch.is_tensor(out) else [o for o in out if torch.is_tensor(o)]
        return sum((o ** 2).sum() / 2 for o in outs if o.is_floating_point())


def data(rank=0, world=1):
    \"\"\"The batched inputs, detached, cut to this rank's share of the batch.\"\"\"
    return [even_args[i].detach().chunk(world, dim=axis)[rank].contiguous() for i, axis in sorted(axes.items())]


def parameter_grads(module):
    return {n: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().double() for n, p in module.weights.items()}


def rank_main(rank, folder, answers):
    \"\"\"One rank: its share of the batch under DistributedDataParallel; sends its gradients (times WORLD: DDP
    averages) or the error.\"\"\"
    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{folder}/init", rank=rank, world_size=WORLD,
                                timeout=datetime.timedelta(seconds=60))
        module = torch.nn.parallel.DistributedDataParallel(Harness(even_args), find_unused_parameters=True)
        module(*data(rank, WORLD)).backward()
        answers.put((rank, {n: (g * WORLD).tolist() for n, g in parameter_grads(module.module).items()}))
        dist.destroy_process_group()
    except Exception as exc:
        answers.put((rank, f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]} "
                           f"(at {traceback.extract_tb(exc.__traceback__)[-1].filename}:{traceback.extract_tb(exc.__traceback__)[-1].lineno})"))


reference = Harness(even_args)  # one process, the whole batch
reference(*data()).backward()
expected = parameter_grads(reference)
os.environ.update({"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"})
context = multiprocessing.get_context("fork")
answers, failed = context.Queue(), False
with tempfile.TemporaryDirectory() as folder:
    ranks = [context.Process(target=rank_main, args=(rank, folder, answers)) for rank in range(WORLD)]
    for process in ranks:
        process.start()
    found = {}
    try:
        for _ in range(WORLD):
            rank, answer = answers.get(timeout=120)
            found[rank] = answer
    except queue.Empty:  # a rank neither answered nor failed
        missing = [rank for rank in range(WORLD) if rank not in found]
        print(f"rank {missing[0]} did not answer within 120 s: a hang in a collective or in the target")
        failed = True
    for process in ranks:
        process.join(timeout=5)
        if process.is_alive():
            process.kill()
for rank, answer in sorted(found.items()):
    if isinstance(answer, str):
        print(f"rank {rank} raised {answer}")
        failed = True
        continue
    for name, grad in expected.items():
        got = torch.tensor(answer[name], dtype=torch.float64)
        if not close(got, grad):
            what = f"the scale of input {name}" if int(name) in axes else f"input {name} (as a parameter)"
            print(f"rank {rank}: DDP gradient of {what} differs from one process on the whole batch: max |difference|",
                  (got - grad).abs().max().item())
            failed = True
print("the ranks disagree with one process" if failed else "both ranks' gradients equal one process's")
sys.exit(1 if failed else 0)
"""


CHECK = declared(
    "distributed",
    run=run,
    script=SCRIPT,
    script_values=_script_values,
)

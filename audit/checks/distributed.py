"""``distributed``: under DistributedDataParallel (2 CPU ranks, gloo on loopback) the synchronised
gradients of a batch split across ranks equal one process's gradients on the whole batch.

The ranks are the worker's (:mod:`audit.runtime.ranks`): one pair serves every cell and example of a worker, and an
example takes a few milliseconds. A rank that errors, dies or does not answer within the timeout fails the example.
"""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import Violation, tolerance_values
from audit.kit.refusal import NotApplicable
from audit.core.contract import COMPLEX_DTYPES
from audit.kit.compare import mismatch
from audit.kit.ddp import RANK_ENV, rank_error, rank_gradients, whole_batch_gradients
from audit.runtime.rank_messages import GradientsRequest
from audit.runtime.ranks import WORLD, close_ranks, shared_ranks
from audit.toolkit import ddp


def distributed(fn, ref, args, *, target, tol, axes, even_args, dim, world) -> list:
    """The target trained as :class:`audit.kit.ddp.Harness` on ``even_args`` (the case with the batch dim ``dim`` made
    a multiple of ``world``, split along ``axes``): the gradients of ``world`` ranks forked from this process under
    DistributedDataParallel equal one process's on the whole batch within ``tol``."""
    expected = whole_batch_gradients(target, even_args, axes)
    if not expected:
        return []  # nothing for DistributedDataParallel to synchronise
    return ddp_problems(forked_ranks(target, even_args, axes, world), expected, axes, dim, world, tol)


def ddp_problems(answers: list, expected: dict, axes: dict, dim: str, world: int, tol) -> list:
    """What a rank said went wrong (a str answer), or the first parameter gradient of a rank (a dict answer: name
    -> nested lists) that differs from ``expected`` (one process's on the whole batch)."""
    for rank, answer in enumerate(answers):
        if isinstance(answer, str):
            return [answer]
        for name, grad in expected.items():
            got = torch.tensor(answer[name], dtype=torch.float64)
            problem = mismatch(got, torch.tensor(grad, dtype=torch.float64), tol)
            if problem:
                what = f"scale of input {name}" if int(name) in axes else f"input {name} (as a parameter)"
                return [f"rank {rank}: DDP gradient of the {what}, batch split along {dim} over {world} ranks, "
                        f"differs from one process on the whole batch: {problem}; a forward or backward that keeps "
                        "per-process state (batch statistics, buffers) needs a collective"]
    return []


def forked_ranks(fn, args: list, axes: dict, world: int, timeout: float = 120.0) -> list:
    """Each rank's :func:`audit.kit.ddp.rank_gradients`, or what went wrong there (a str), from ``world`` ranks forked
    from this process (Linux), gloo on the loopback interface: how a replay script runs the audit's ranks. A rank
    that neither answers nor fails within ``timeout`` seconds is said to hang."""
    import multiprocessing
    import os
    import queue
    import tempfile

    import torch._dynamo  # noqa: F401 - DistributedDataParallel imports it: once here, not in each forked rank

    os.environ.update(RANK_ENV)
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    found: dict = {}
    with tempfile.TemporaryDirectory() as folder:
        ranks = [context.Process(target=one_rank, args=(fn, args, axes, rank, world, folder, answers))
                 for rank in range(world)]
        for process in ranks:
            process.start()
        try:
            while len(found) < world:
                rank, answer = answers.get(timeout=timeout)
                found[rank] = answer
        except queue.Empty:  # a rank neither answered nor failed
            pass
        for process in ranks:
            process.join(timeout=5)
            if process.is_alive():
                process.kill()
    return [found.get(rank, f"rank {rank} did not answer within {timeout:.0f} s: a hang in a collective or in the "
                            "entry") for rank in range(world)]


def one_rank(fn, args: list, axes: dict, rank: int, world: int, folder: str, answers) -> None:
    """A forked rank: joins the group, puts (rank, its gradients) or (rank, what it raised) on ``answers``."""
    import datetime

    import torch.distributed as dist

    try:
        torch.set_num_threads(1)
        dist.init_process_group("gloo", init_method=f"file://{folder}/init", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=60))
        answers.put((rank, rank_gradients(fn, args, axes, rank, world)))
        dist.destroy_process_group()
    except Exception as exc:
        answers.put((rank, f"rank {rank} raised {rank_error(exc)}"))


def run(subject, case) -> None:
    """Whole batch in this process against the gradients of the worker's ranks (started once, see
    :class:`audit.runtime.ranks.Ranks`): :func:`distributed`'s stages, with the audit's ranks in place of forked
    ones."""
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
    axes = ddp.batched_axes(subject.entry, dim)
    expected = whole_batch_gradients(subject.target.fn, subject.args(case), axes)
    if not expected:
        raise NotApplicable("no input requires a gradient: nothing for DistributedDataParallel to synchronise")
    subject.metrics["world"] = WORLD
    try:
        ranks = shared_ranks()
        answers = ranks.ask(GradientsRequest(ranks.spec(subject), case.to_json(), dim))
    except Violation:
        close_ranks()  # a fresh pair serves the next example
        raise
    found = ddp_problems([answer.grads for answer in answers], expected, axes, dim, WORLD, subject.tolerance())
    if found:
        raise Violation(found[0])


def _script_values(subject, case) -> dict:
    """The comparison, the split dim and the axis it has in each input, the case as split (that dim made even),
    and the number of ranks."""
    entry, dim = subject.entry, ddp.batch_dim(subject.entry, WORLD)
    if dim is None:
        return {}
    return {**tolerance_values(subject, case), "axes": ddp.batched_axes(entry, dim), "dim": dim,
            "even_args": ddp.even(entry, case, dim, WORLD), "world": WORLD}


CHECK = declared(
    "distributed",
    run=run,
    replay=distributed,
    replay_helpers=(ddp_problems, forked_ranks, one_rank),
    script_values=_script_values,
)

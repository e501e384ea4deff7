"""One rank of the distributed check: ``python -m audit.runtime.ddp_rank READ_FD WRITE_FD RANK WORLD INIT_FILE
TIMEOUT``.

Joins a gloo process group on the loopback interface once, then answers each request on its pipe (the
pickled cell to load, a case, the batch dim) with its gradients under DistributedDataParallel, or the
error. The pipes are the protocol's own (see :mod:`audit.runtime.channel`): what a target prints goes to
the rank's log. Targets are loaded on first use and kept, so one pair of ranks serves every cell of a
worker; global torch state a request changes is put back after it, as in the worker. Dies with its
parent (Linux), and ends when the parent closes the pipe.
"""

from __future__ import annotations

import ctypes
import datetime
import pickle
import sys
from pathlib import Path

from audit.runtime.channel import connect
from audit.runtime.rank_messages import Gradients, GradientsRequest, Joined, RankError, RankSpec


def main(argv: list[str]) -> int:
    """Join the group, then serve requests until the parent closes the pipe."""
    inbox, outbox = connect(argv)
    return serve(inbox, outbox, int(argv[2]), int(argv[3]), argv[4], float(argv[5]))


def serve(inbox, outbox, rank: int, world: int, init_file: str, timeout: float) -> int:
    """Join the group, then answer requests until the parent closes the pipe: the rank's whole life, whether
    it was started as a module (:func:`main`) or forked from a worker (:func:`audit.runtime.channel.fork`)."""
    from audit.runtime.reaper import end_strays

    _die_with_parent()
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout))
    outbox.send(Joined())  # the parent's start-up wait is over
    loaded: dict[str, tuple] = {}
    while True:
        try:
            request = inbox.recv()
        except EOFError:
            break
        answer = _answer(request, loaded, rank, world)
        end_strays()  # what the target started on this rank ends with the request
        outbox.send(answer)
    dist.destroy_process_group()
    return 0


def _answer(request: GradientsRequest, loaded: dict, rank: int, world: int) -> Gradients | RankError:
    """This rank's gradients for ``request``, or the error, with where it happened."""
    from audit.runtime.isolation import isolated

    from audit.kit.calls import reseed

    try:
        subject, state = _subject(request.spec, loaded)
        with isolated(state):
            reseed(subject.seed)  # a stochastic target's draws: the cell's, not what the ranks served before it
            return Gradients(_gradients(subject, request, rank, world))
    except Exception as exc:  # the target's fault, reported to the check with where it happened
        from audit.kit.ddp import rank_error

        return RankError(rank_error(exc))


def _subject(spec: str, loaded: dict):
    """The cell's subject, loaded on first use, and the global state its import left (its cells run with it,
    as in the worker; other entries do not)."""
    from audit.runtime.subject import Subject
    from audit.runtime.isolation import GlobalState, isolated
    from audit.runtime.target import resolve

    if spec not in loaded:
        with open(spec, "rb") as handle:
            cell: RankSpec = pickle.load(handle)
        with isolated():
            target = resolve(cell.entry, Path(cell.base))
            state = GlobalState.capture()
        loaded[spec] = (Subject(cell.entry, target, cell.dtype, "cpu", cell.seed), state)
    return loaded[spec]


def _gradients(subject, request: GradientsRequest, rank: int, world: int) -> dict[str, list]:
    """Each parameter's gradient under DistributedDataParallel on this rank's share of the batch, scaled by
    ``world`` (DDP averages; the check compares sums)."""
    from audit.inputs.case import Case
    from audit.kit.ddp import rank_gradients
    from audit.toolkit import ddp

    args = subject.args(Case.from_json(request.case))
    return rank_gradients(subject.target.fn, args, ddp.batched_axes(subject.entry, request.dim), rank, world)


#: The name ``ps`` and /proc/PID/comm show for a rank (a forked one's command line is its worker's).
NAME = b"audit-rank"


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the audit worker that started it dies, and name it a rank."""
    from audit.runtime.reaper import die_with_parent

    die_with_parent()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(15, ctypes.c_char_p(NAME))  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""One rank of the distributed check: ``python -m audit.checks.ddp_rank RANK WORLD INIT_FILE``.

Joins a gloo process group on the loopback interface once, then answers one JSON request per line on
stdin (the pickled cell to load, a case, the batch dim) with one JSON line on stdout: its gradients under
DistributedDataParallel, or the error. Targets are loaded on first use and kept, so one pair of ranks
serves every cell of a worker. Dies with its parent (Linux), and ends at end of input.
"""

from __future__ import annotations

import ctypes
import datetime
import json
import pickle
import signal
import sys
import traceback
from pathlib import Path


def main(argv: list[str]) -> int:
    rank, world, init_file = int(argv[0]), int(argv[1]), argv[2]
    _die_with_parent()
    import torch
    import torch.distributed as dist

    from audit.checks import ddp
    from audit.checks.subject import Subject
    from audit.engine.target import resolve
    from audit.inputs.case import Case

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=float(argv[3])))
    subjects: dict[str, object] = {}
    for line in sys.stdin:
        request = json.loads(line)
        try:
            if request["spec"] not in subjects:
                with open(request["spec"], "rb") as handle:
                    job = pickle.load(handle)
                target = resolve(job["entry"], Path(job["base"]))
                subjects[request["spec"]] = Subject(job["entry"], target, job["dtype"], "cpu", job["seed"])
            subject = subjects[request["spec"]]
            entry, target = subject.entry, subject.target
            case = Case.from_json(request["case"])
            args = subject.args(case)
            axes = ddp.batched_axes(entry, request["dim"])
            module = torch.nn.parallel.DistributedDataParallel(ddp.Harness(target.fn, args, axes),
                                                               find_unused_parameters=True)
            loss = module(*ddp.data(args, axes, rank, world))
            loss.backward()
            grads = {name: (torch.tensor(g) * world).tolist() for name, g in ddp.gradients(module.module).items()}
            answer = {"ok": True, "grads": grads}
        except Exception as exc:  # the target's fault, reported to the check with where it happened
            frames = traceback.extract_tb(exc.__traceback__)
            where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
            answer = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}{where}"}
        print(json.dumps(answer), flush=True)
    dist.destroy_process_group()
    return 0


def _die_with_parent() -> None:
    """Ask Linux to kill this process when the audit worker that started it dies."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

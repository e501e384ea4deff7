"""The worker process: imports torch once, then audits the entries the parent sends, cell by cell.

Run as ``python -m audit.engine.worker READ_FD WRITE_FD MAX_MEMORY``. A crash, hang or memory
blow-up here is the parent's to notice; the worker only reports what it starts and finishes.
"""

from __future__ import annotations

import platform
import resource
import sys
import traceback
from multiprocessing.connection import Connection
from pathlib import Path


def main(argv: list[str]) -> int:
    """Serve jobs until the parent says stop or closes the pipe."""
    inbox, outbox = Connection(int(argv[0]), writable=False), Connection(int(argv[1]), readable=False)
    import torch

    torch.set_num_threads(1)
    _cap_memory(int(argv[2]))
    outbox.send(("ready", environment()))
    while True:
        try:
            message = inbox.recv()
        except EOFError:
            return 0
        if message[0] == "stop":
            return 0
        _job(message[1], outbox)


def environment() -> dict:
    """The facts about this process's torch that the matrix records."""
    import torch

    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if hasattr(torch.backends, "mps") and torch.backends.mps.is_available():
        devices.append("mps")
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "devices": devices,
            "python": platform.python_version(), "platform": platform.platform()}


def _cap_memory(limit: int) -> None:
    """Cap the address space at what torch's import took plus ``limit``: a blow-up raises here."""
    if limit <= 0:
        return
    with open("/proc/self/status") as status:
        vm = next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:")), 0)
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + limit
    resource.setrlimit(resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))


def _job(job, outbox: Connection) -> None:
    from audit.engine.cell import error_outcome, run_cell
    from audit.engine.target import TargetError, resolve

    entry, keys, options = job["entry"], job["cells"], job["options"]
    try:
        target = resolve(entry, Path(options.base))
    except (TargetError, SyntaxError) as exc:
        outbox.send(("target", None, str(exc)))
        for key in keys:
            outbox.send(("outcome", error_outcome(key, f"target could not be loaded: {exc}")))
        outbox.send(("done",))
        return
    outbox.send(("target", target.digest, ""))
    checks = _checks(options.checks_dir)
    for key in keys:
        outbox.send(("start", key))
        check = checks[key.check]
        on_example = lambda case: outbox.send(("example", case.describe()))  # noqa: E731
        try:
            outcome = run_cell(entry, target, check, key, options, job["claimed"][key], on_example)
        except MemoryError as exc:
            outcome = error_outcome(key, f"out of memory: over the worker's cap of {options.max_memory >> 20} MiB "
                                         f"(raise it with --max-memory): {exc}")
        except Exception as exc:
            outcome = error_outcome(key, f"the audit failed: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        outbox.send(("outcome", outcome))
    outbox.send(("done",))


_TABLES: dict = {}


def _checks(folder: str | None) -> dict:
    from audit.checks import table

    if folder not in _TABLES:
        _TABLES[folder] = table(Path(folder) if folder else None)
    return _TABLES[folder]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

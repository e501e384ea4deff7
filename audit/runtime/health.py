"""The health of the worker process itself: when a worker may be damaged, it is retired, never reused.

Per-process *Python* state (grad mode, dtype, generators...) is put back after every cell
(:mod:`audit.runtime.isolation`). What cannot be put back is the process: memory a target hoards in a module
global, threads it started and never ended, address space it reserved, an interpreter or a Hypothesis engine
left inconsistent by a ``RecursionError`` in the middle of their own code. Whatever runs next in that process
would fail for its neighbour's sake (an ``import`` that cannot map its library, a thread that cannot start), so
its verdict would depend on the schedule. Three rules keep a verdict the entry's own:

1. **Damage ends the cell and the worker.** An exception that says the process is exhausted or inconsistent
   (:func:`damage`: ``MemoryError``, ``RecursionError``, ``SystemError``, a thread or resource that could not
   be created, CUDA's allocator out of memory, a CUDA error that leaves the context unusable, a
   ``BaseException`` such as ``KeyboardInterrupt``) is noted when the target raises it
   (:func:`note`); the search stops there, the cell is an ``error`` and the worker retires after it.
2. **A checkup between entries** (:func:`checkup`): a worker whose threads, descriptors, resident memory or
   address space grew past the bounds below since it started, that can no longer map memory or start a thread,
   or whose CUDA context is lost, retires; so does one that served :data:`MAX_ENTRIES` entries (as gunicorn's
   ``max_requests``).
3. **A forked copy of the worker never runs the audit's code**: a target that calls ``os.fork()`` and lets
   the child return lands, in the child, in :func:`stray_fork_guard`, which ends it at once and leaves its
   pid for the cell's message (:func:`forked_strays`).

A kernel's fault on the GPU (an illegal memory access, a device-side assert) is reported asynchronously, at the
next synchronisation, and it is sticky: every later CUDA call of the process fails with it. So a CUDA cell ends
with a synchronisation (:func:`cuda_fault`), which puts the fault in the cell that caused it, and the checkup
between entries synchronises too.

The bounds were measured on the bench registry (``python -m bench.health``: ``bench/registry.yaml``, every check,
``-j 1``; ``bench/results.md`` section 7): over its 21 entries a healthy worker gained at most 1 thread, no
descriptor, 138 MiB of resident memory and 175 MiB of address space; each bound is at least 20x that, and far
below where a neighbour starts to fail. A checkup takes under a millisecond.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import sys
import threading
import time
from dataclasses import dataclass

from audit.core.errors import first_line

#: Threads a worker may have gained since start-up (a healthy entry leaves none or a few: torch's own pools
#: are sized once); a thread-hoarding target leaves hundreds.
MAX_NEW_THREADS = 64
#: Open descriptors it may have gained (the soft limit is often 1,024).
MAX_NEW_DESCRIPTORS = 256
#: Resident memory it may have gained, in bytes: what a target keeps (a cache, a hoard) stays for the next.
MAX_NEW_RESIDENT = 3 << 30
#: Address space it may have gained, as a share of the worker's cap (``--max-memory``); without a cap, in bytes.
MAX_NEW_ADDRESS_SHARE = 0.5
MAX_NEW_ADDRESS = 32 << 30
#: Address space a healthy worker can still map (what importing a library with large segments needs).
HEADROOM = 512 << 20
#: Entries one worker serves before a fresh one takes over (bounded reuse, whatever the checkup finds).
MAX_ENTRIES = 200
#: errno values of a resource the process could not get.
EXHAUSTED = frozenset({errno.EAGAIN, errno.ENOMEM, errno.EMFILE, errno.ENFILE, errno.ENOSPC})
#: Words of a torch or CPython message that reports the same.
EXHAUSTED_WORDS = ("can't start new thread", "Resource temporarily unavailable", "Cannot allocate memory",
                   "can't allocate memory", "Too many open files", "failed to map segment")
#: CUDA errors after which the process's CUDA context is unusable (sticky: every later CUDA call fails with them),
#: as torch (``CUDA error: ...``, ``torch.AcceleratorError`` since 2.8) and Triton's launcher word them. Others, such
#: as an invalid launch configuration, leave the context as it was: they are the target's failure.
CUDA_STICKY_WORDS = ("illegal memory access", "device-side assert", "unspecified launch failure", "misaligned address",
                     "illegal instruction", "hardware stack error", "uncorrectable ECC", "the launch timed out")
#: How CUDA's caching allocator words a refused allocation (``torch.OutOfMemoryError``).
CUDA_OUT_OF_MEMORY = "CUDA out of memory"

_DAMAGE: list[str] = []


def damage(exc: BaseException) -> str:
    """Why ``exc`` means this process may be damaged ("" when it does not): the exception itself, or any in its
    chain of causes, is one of the kinds in the module's docstring."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        reason = _kind(current)
        if reason:
            return reason
        current = current.__cause__ or current.__context__
    return ""


def _kind(exc: BaseException) -> str:
    name = type(exc).__name__
    if not isinstance(exc, Exception):
        return f"the target raised {name}"
    if isinstance(exc, (MemoryError, RecursionError, SystemError)):
        return f"the target raised {name}"
    if isinstance(exc, OSError) and exc.errno in EXHAUSTED:
        return f"the target exhausted a resource ({name}: {os.strerror(exc.errno)})"
    text = str(exc)
    word = next((w for w in EXHAUSTED_WORDS if w in text), "")
    if word:
        return f"the target exhausted a resource ({name}: {word})"
    return _cuda_kind(name, text)


def _cuda_kind(name: str, text: str) -> str:
    """Damage to the process's CUDA state: memory the allocator refused (what holds the rest may be a neighbour's
    hoard, or the allocator's cache left fragmented), or a sticky error (the context is lost)."""
    if CUDA_OUT_OF_MEMORY in text:
        return f"the target ran out of CUDA memory ({name})"
    word = next((w for w in CUDA_STICKY_WORDS if w in text), "")
    return f"the CUDA context is lost ({name}: {word})" if word else ""


def cuda_fault() -> str:
    """Why this process's CUDA context cannot be trusted any more ("" when it can, or CUDA was never initialised
    here): a synchronisation raises what a kernel left behind asynchronously. Needs no import: a process that never
    imported torch has no CUDA context."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return ""
    try:
        torch.cuda.synchronize()
    except Exception as exc:  # whatever a synchronisation raises is the context's state
        return damage(exc) or f"the CUDA context is lost ({type(exc).__name__}: {first_line(exc)})"
    return ""


def note(reason: str) -> None:
    """Record that the running cell may have damaged this process (the first reason is kept)."""
    if reason and not _DAMAGE:
        _DAMAGE.append(reason)


def taken() -> str:
    """The damage noted since the last call ("" when none), forgotten by this call."""
    reason = _DAMAGE[0] if _DAMAGE else ""
    _DAMAGE.clear()
    return reason


@dataclass(frozen=True)
class Reading:
    """What the checkup measures of this process."""

    threads: int
    descriptors: int
    resident: int
    address: int


def read() -> Reading:
    """This process's threads, open descriptors, resident memory and address space (Linux ``/proc``;
    elsewhere what Python sees: its own threads, and zeros)."""
    status = _status()
    threads = status.get("Threads", threading.active_count())
    descriptors = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    return Reading(threads, descriptors, status.get("VmRSS", 0) * 1024, status.get("VmSize", 0) * 1024)


def _status() -> dict[str, int]:
    try:
        with open("/proc/self/status") as status:
            lines = status.read().splitlines()
    except OSError:
        return {}
    found = {}
    for line in lines:
        key, _, value = line.partition(":")
        if key in ("Threads", "VmRSS", "VmSize"):
            found[key] = int(value.split()[0])
    return found


@dataclass(frozen=True)
class Bounds:
    """How far a worker may grow from its start-up :class:`Reading` before it retires."""

    start: Reading
    max_memory: int = 0

    def exceeded(self, now: Reading) -> str:
        """What grew past its bound ("" when nothing did)."""
        start = self.start
        address = int(self.max_memory * MAX_NEW_ADDRESS_SHARE) if self.max_memory > 0 else MAX_NEW_ADDRESS
        for what, grown, bound, unit in (("threads", now.threads - start.threads, MAX_NEW_THREADS, ""),
                                         ("open descriptors", now.descriptors - start.descriptors,
                                          MAX_NEW_DESCRIPTORS, ""),
                                         ("resident memory", now.resident - start.resident, MAX_NEW_RESIDENT, "MiB"),
                                         ("address space", now.address - start.address, address, "MiB")):
            if grown > bound:
                shown = (f"{grown >> 20} MiB, bound {bound >> 20} MiB" if unit else f"{grown}, bound {bound}")
                return f"its {what} grew by {shown} since it started"
        return ""


def checkup(bounds: Bounds, served: int, after: str = "") -> str:
    """Why this worker should retire before its next entry ("" when it is fit): it served :data:`MAX_ENTRIES`,
    grew past ``bounds``, lost its CUDA context (:func:`cuda_fault`), or cannot map :data:`HEADROOM` more memory or
    start a thread. With ``AUDIT_HEALTH_LOG`` set (the benchmark's measurement), each checkup appends a JSON line
    there: the entry it followed, the growth since start-up, its seconds and its finding."""
    if not os.environ.get("AUDIT_HEALTH_LOG"):
        return _checkup(bounds, served)
    started = time.perf_counter()
    found = _checkup(bounds, served)
    now = read()
    line = {"after": after, "seconds": time.perf_counter() - started, "retire": found,
            **{f"grown_{k}": getattr(now, k) - getattr(bounds.start, k) for k in ("threads", "descriptors", "resident",
                                                                             "address")}}
    with open(os.environ["AUDIT_HEALTH_LOG"], "a") as log:
        log.write(json.dumps(line) + "\n")
    return found


def _checkup(bounds: Bounds, served: int) -> str:
    if served >= MAX_ENTRIES:
        return f"it served {served} entries (workers are recycled after {MAX_ENTRIES})"
    grown = bounds.exceeded(read()) or cuda_fault()
    if grown:
        return grown
    try:
        mmap.mmap(-1, HEADROOM).close()
    except (OSError, MemoryError) as exc:
        return f"it can no longer map {HEADROOM >> 20} MiB ({type(exc).__name__}: {exc})"
    try:
        probe = threading.Thread(target=lambda: None, name="audit-health")
        probe.start()
        probe.join()
    except RuntimeError as exc:
        return f"it can no longer start a thread ({exc})"
    return ""


#: The process that runs cells (set by :func:`own`); the pipe a forked stray leaves its pid in, then the pids read.
_OWNER: list[int] = []
_STRAYS: list[int] = []
STRAY_EXIT = 86


def own() -> None:
    """This process runs a cell now: a forked copy of it that reaches :func:`stray_fork_guard` is a stray, and
    :func:`forked_strays` and the damage noted (:func:`taken`) start again: what an earlier cell left, where no
    worker took it (the Python API runs cells in its own process), is not this cell's."""
    _DAMAGE.clear()
    pid = os.getpid()
    if _OWNER == [pid]:
        forked_strays()  # an earlier cell's, collected
        del _STRAYS[2:]
    else:
        _OWNER[:] = [pid]
        for fd in _STRAYS[:2]:
            os.close(fd)
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        _STRAYS[:] = [read_end, write_end]  # then the pids found


def stray_fork_guard() -> None:
    """Called where the audit gets control back from the target: in a forked copy of the process that runs
    cells (the target called ``os.fork()`` and the child returned), leave the pid and end at once."""
    if _OWNER and os.getpid() != _OWNER[0]:
        try:
            os.write(_STRAYS[1], os.getpid().to_bytes(4, "little"))
        finally:
            os._exit(STRAY_EXIT)


def forked_strays() -> list[int]:
    """The pids of the forked copies that reached the guard since :func:`own` (each collected, so that none
    lingers as a zombie)."""
    if not _STRAYS:  # no cell has run in this process
        return []
    data = b""
    while True:
        try:
            chunk = os.read(_STRAYS[0], 4096)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    for i in range(0, len(data) - 3, 4):
        pid = int.from_bytes(data[i:i + 4], "little")
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)  # it ends right after writing
        _STRAYS.append(pid)
    return list(_STRAYS[2:])


def describe_strays(pids: list[int]) -> str:
    """What the cell's message says of forked strays."""
    shown = ", ".join(map(str, pids[:3])) + (f" and {len(pids) - 3} more" if len(pids) > 3 else "")
    return (f"the target forked this process (pid {shown}) and the child returned into the audit instead of "
            "exiting (os.fork() without os._exit() in the child); each was ended as it returned")

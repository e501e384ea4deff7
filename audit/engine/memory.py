"""The worker's memory cap (``--max-memory``), on every platform the worker runs on.

Linux enforces an address-space limit (``RLIMIT_AS``): an allocation past the cap raises ``MemoryError``
inside the cell, which becomes an ``error`` cell while the worker lives on. macOS accepts that limit but
does not enforce it, so there a watchdog thread reads the process's peak resident memory every
:data:`POLL` seconds and ends the worker past the cap with :data:`EXIT_OUT_OF_MEMORY`; the parent reports
the running cell as out of memory and starts a fresh worker. Where neither exists (Windows has no
``resource`` module) nothing is capped, and :func:`cap` says so.
"""

from __future__ import annotations

import os
import sys
import threading
import time

#: The exit code of a worker its watchdog ended (EX_TEMPFAIL: no other exit of a worker means it).
EXIT_OUT_OF_MEMORY = 75
#: Seconds between two readings of the resident memory: an allocation outruns it by at most this long.
POLL = 0.05
#: How the cap is enforced; ``AUTOGRAD_AUDIT_MEMORY_CAP`` chooses one (tests run the watchdog on Linux).
METHODS = ("address-space", "watchdog", "none")


def cap(limit: int, method: str | None = None) -> str:
    """Cap this process at what it holds now plus ``limit`` bytes (0: no cap); returns the method used."""
    chosen = method or os.environ.get("AUTOGRAD_AUDIT_MEMORY_CAP", "")
    method = chosen if chosen in METHODS else default_method()  # an unknown name: the platform's own
    if limit <= 0 or method == "none":
        return "none"
    if method == "address-space":
        _cap_address_space(limit)
    else:
        base = peak_resident()
        threading.Thread(target=_watch, args=(base + limit, limit), name="memory-watchdog", daemon=True).start()
    return method


def default_method() -> str:
    """The address-space limit where the kernel enforces it (Linux), else the watchdog, else nothing."""
    try:
        import resource  # noqa: F401 - absent on Windows
    except ImportError:
        return "none"
    return "address-space" if sys.platform.startswith("linux") else "watchdog"


def _cap_address_space(limit: int) -> None:
    import resource

    with open("/proc/self/status") as status:
        size = next((int(line.split()[1]) * 1024 for line in status if line.startswith("VmSize:")), 0)
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    total = size + limit
    resource.setrlimit(resource.RLIMIT_AS, (total if hard == resource.RLIM_INFINITY else min(total, hard), hard))


def peak_resident() -> int:
    """This process's peak resident memory in bytes (``ru_maxrss``: kilobytes on Linux, bytes on macOS)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def _watch(ceiling: int, limit: int) -> None:
    while peak_resident() <= ceiling:
        time.sleep(POLL)
    sys.stderr.write(f"out of memory: resident memory passed the worker's cap of {limit >> 20} MiB\n")
    sys.stderr.flush()
    os._exit(EXIT_OUT_OF_MEMORY)

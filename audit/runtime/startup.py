"""Start-up work inside a cell (starting the distributed ranks), timed on the start-up budget, not the check's.

The worker installs a reporter once; a check wraps such work in :func:`starting`, and the parent stops the
cell's clock meanwhile. Outside a worker (the Python API, tests) nothing is reported.
"""

from __future__ import annotations

import contextlib

_REPORTERS: list = []


def report_to(send) -> None:
    """Announce start-up work through ``send(what)``, and its end with ``send("")``."""
    _REPORTERS[:] = [send]


@contextlib.contextmanager
def starting(what: str):
    """The body is start-up work; ``what`` (``"starting the distributed ranks"``) names it in a timeout."""
    for send in _REPORTERS:
        send(what)
    try:
        yield
    finally:
        for send in _REPORTERS:
            send("")

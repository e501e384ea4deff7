"""Per-worker resources: what a check needs set up once in the worker process that runs its cells.

A check names one in ``Check.resource``. The engine knows resources only by name: the worker that holds a run's
resources (the first) starts each one the run's checks need, at start-up, before it loads any target, and every
cell of those checks goes to that worker (:mod:`audit.engine.parts`); the other workers never start them.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass


@dataclass(frozen=True)
class Resource:
    """A resource's name, what it is, and the function (``"module:function"``) that starts it in a worker."""

    name: str
    what: str
    start: str


RESOURCES = {resource.name: resource for resource in (
    Resource("ranks", "the distributed check's two rank processes (DistributedDataParallel, gloo on loopback): "
                      "forked once, so they share the worker's torch import", "audit.runtime.ranks:prefork_ranks"),
)}


def start(name: str) -> None:
    """Start the resource ``name`` in this process."""
    module, _, function = RESOURCES[name].start.partition(":")
    getattr(importlib.import_module(module), function)()


def needed(checks) -> tuple[str, ...]:
    """The resources ``checks`` (Check objects) name, each once, in a fixed order."""
    return tuple(sorted({check.resource for check in checks if check.resource}))

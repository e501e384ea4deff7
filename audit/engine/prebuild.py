"""Native sources built ahead, beside the workers: a first run's C++ build holds up no other entry's cells.

A worker builds an entry's native sources (``load: [kernel.cpp]``) when it loads the entry, and waits for the
compiler. On a fresh checkout that was most of a first run's wall time (a 24 s build, one worker idle beside it).
So the engine starts one builder process per distinct set of native sources at the start of the run
(``python -m audit.engine.prebuild BASE ITEM...``): it runs the same :func:`audit.runtime.native.load` a worker runs,
into the same build cache, while the workers audit other entries: an entry whose build is still running is taken
only when no other entry is left (:func:`audit.engine.parts.take`).
The worker that loads such an entry then finds the build done, or waits for it under the build folder's lock
(:func:`audit.runtime.native.build`). A builder says nothing and decides nothing: a build that fails fails again in
the worker, which reports it as today, and builders still running when the run ends are ended with it.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from audit.engine.job import Job
from audit.registry.model import Entry
from audit.runtime.native import is_native
from audit.runtime.reaper import end_group


def native_items(entry: Entry) -> tuple[str, ...]:
    """The entry's ``load`` items that are native sources or libraries (none: nothing to build)."""
    return tuple(item for item in entry.load if is_native(item))


class Builders:
    """The builders of a run's native sources, one per distinct set among its jobs' entries, started at once."""

    def __init__(self, jobs: Iterable[Job], base: str, env: dict[str, str]) -> None:
        wanted = dict.fromkeys(items for items in (native_items(job.entry) for job in jobs) if items)
        self.running: dict[tuple[str, ...], subprocess.Popen[bytes]] = {items: _builder(items, base, env)
                                                                          for items in wanted}

    def building(self, job: Job) -> bool:
        """Whether ``job``'s native sources are still being built: a worker takes another entry first."""
        builder = self.running.get(native_items(job.entry))
        return builder is not None and builder.poll() is None

    def close(self) -> None:
        """End every builder still running, with the compiler it started (the run is over)."""
        for builder in self.running.values():
            end_group(builder)


def _builder(items: tuple[str, ...], base: str, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "audit.engine.prebuild", base, *items], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)  # its own group: ended with the compiler it started


def main(argv: list[str]) -> int:
    """Build (and load, as a worker does) the native ``argv[1:]`` relative to ``argv[0]``; 0 whatever happened."""
    from audit.runtime.native import NativeError, load
    from audit.runtime.reaper import die_with_parent

    die_with_parent()  # a run killed with SIGKILL takes its builders with it
    with contextlib.suppress(NativeError):  # the worker builds again and reports it
        load(argv[1:], Path(argv[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

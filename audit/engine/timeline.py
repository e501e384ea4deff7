"""Where a run's wall time goes: the engine stamps each phase as it happens, for a profile of a whole run.

With ``AUDIT_TIMELINE=FILE`` set, the parent appends one JSON object a line to FILE: ``{"t": epoch seconds, "slot":
the worker's slot or null, "what": ..., "name": ...}``. ``what`` is ``spawn`` (a worker process started), ``ready``
(it imported torch and started its resources), ``assign`` (an entry's part sent to it), ``loaded`` (its target
imported and native sources built), ``cell`` and ``cell_end`` (a cell ran), ``startup`` and ``startup_end`` (start-up
work inside a cell, off its budget), ``job_end`` (the part done), ``workers_done`` (the last worker closed), and
``written`` (the matrix and reports are on disk). Unset, nothing is stamped and nothing is written.

``python -m bench.firstrun`` reads it to split a first run's wall time into its phases. Timestamps are the wall
clock, so a caller outside the run can place its own start and end among them.
"""

from __future__ import annotations

import json
import os
import time

#: The environment variable that names the file (unset: no timeline).
VARIABLE = "AUDIT_TIMELINE"


def stamp(what: str, slot: int | None = None, name: str = "") -> None:
    """Append one event to the timeline, when ``AUDIT_TIMELINE`` names a file; a file that cannot be written is
    left alone (a profile never fails the run it profiles)."""
    path = os.environ.get(VARIABLE)
    if not path:
        return
    line = json.dumps({"t": time.time(), "slot": slot, "what": what, "name": name})
    try:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")
    except OSError:
        return

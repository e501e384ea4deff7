"""Run many replay scripts in one fresh interpreter (one torch import for all), as ``python FILE`` would:
prints one JSON line per script, ``{"path", "code", "output"}``. An uncaught exception is exit code 1."""

from __future__ import annotations

import contextlib
import io
import json
import runpy
import subprocess
import sys
import traceback
from pathlib import Path

#: A script that forks processes (the distributed check's ranks) runs in an interpreter of its own, as
#: ``python FILE`` would: forked from this one, which has run many scripts and started their threads (Dynamo's,
#: a rank pair's), a child can inherit a lock another thread held and hang.
FORKS = 'get_context("fork")'


def run(path: str) -> dict:
    """Exit code and output of the script at ``path``."""
    if FORKS in Path(path).read_text():
        done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=600)
        return {"path": path, "code": done.returncode, "output": (done.stdout + done.stderr)[-4000:]}
    buffer = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
        try:
            runpy.run_path(path, run_name="__main__")
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:  # as the interpreter would: a traceback and exit code 1
            traceback.print_exc()
            code = 1
    return {"path": path, "code": code, "output": buffer.getvalue()[-4000:]}


if __name__ == "__main__":
    for script in sys.argv[1:]:
        print(json.dumps(run(script)), flush=True)

"""An unexpected exception inside the audit: one line for the terminal, a log with the rest.

Like pre-commit's ``pre-commit.log``: the traceback, the command line and the environment go to one
file a user can attach to a bug report, overwritten by the next crash.
"""

from __future__ import annotations

import os
import platform
import sys
import traceback
from importlib import metadata
from pathlib import Path


def log_path() -> Path:
    """``$AUDIT_CRASH_LOG``, else ``crash.log`` in the user's cache folder (``$XDG_CACHE_HOME``)."""
    if os.environ.get("AUDIT_CRASH_LOG"):
        return Path(os.environ["AUDIT_CRASH_LOG"])
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "autograd-audit" / "crash.log"


def write_log(exc: BaseException) -> Path | None:
    """Write the crash log; its path, or None when even that failed."""
    path = log_path()
    text = "\n".join([
        "### autograd-audit crash log",
        f"command: {' '.join(sys.argv)}",
        f"working directory: {os.getcwd()}",
        *(f"{name}: {version}" for name, version in _versions().items()),
        f"python: {sys.version.split()[0]} ({sys.executable})",
        f"platform: {platform.platform()}",
        "",
        "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)),
    ])
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError:
        return None
    return path


def _versions() -> dict[str, str]:
    found = {}
    for name in ("autograd-audit", "torch", "hypothesis", "click", "pyyaml"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    return found

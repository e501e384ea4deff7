"""The environment a cached run keys its cells by and records, known without importing torch while nothing it
depends on has changed.

:func:`audit.engine.worker.environment` asks torch (its version, CUDA version and devices): importing torch
costs seconds, most of a warm pre-merge run. So the result cache keeps, beside its records, the environment last
computed here with the :func:`fingerprint` it was computed under: cheap facts, read without importing torch,
that every field of the environment depends on. While the fingerprint is unchanged the stored environment is
used; any change (another torch, Python or platform, other visible devices, a GPU or driver added or gone)
recomputes it with torch, as a run without the store would.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import sys
from pathlib import Path
from typing import Any

from audit.core.io import write_atomic
from audit.results.environment import Environment

#: The file, in the cache folder, that holds the last environment and its fingerprint.
STORE = "environment.json"
#: Variables that change which devices torch sees, or which driver library it loads.
VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "PYTORCH_NVML_BASED_CUDA_CHECK",
             "LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH")
#: Files whose content says which GPU driver is loaded (absent without one).
DRIVER_FILES = ("/proc/driver/nvidia/version",)
#: Folders whose listing names the GPUs present: NVIDIA's per-GPU folders and device nodes, ROCm's render nodes.
DEVICE_FOLDERS = ("/proc/driver/nvidia/gpus", "/dev/dri")
#: Device nodes of GPU drivers in /dev (nvidiactl, nvidia0, nvidia1..., kfd for ROCm).
DEVICE_NODES = ("nvidia", "kfd")


def known(folder: Path) -> Environment:
    """The environment :func:`audit.engine.worker.environment` gives here: the one stored in ``folder`` when its
    fingerprint still matches, else computed (importing torch) and stored for the next run."""
    now = fingerprint()
    stored = _read(Path(folder) / STORE)
    if stored is not None and stored[0] == now:
        return stored[1]
    from audit.engine.worker import environment

    found = environment()
    record = {"fingerprint": now, "environment": found.to_json()}
    with contextlib.suppress(OSError):  # a read-only cache folder: the next run computes it again, nothing worse
        write_atomic(Path(folder) / STORE, json.dumps(record, sort_keys=True))
    return found


def forget(folder: Path) -> None:
    """Drop the stored environment (the workers reported another one): the next run asks torch again."""
    (Path(folder) / STORE).unlink(missing_ok=True)


def fingerprint() -> dict[str, Any]:
    """What the environment depends on, read without importing torch: the torch package that would be imported
    (its location, and its ``version.py``, the source of ``torch.__version__`` and ``torch.version.cuda``), the
    Python and the platform, the variables that hide devices, and the GPUs and drivers the system shows."""
    spec = importlib.util.find_spec("torch")
    origin = spec.origin if spec and spec.origin else None
    return {
        "torch": [origin, *_file(Path(origin).parent / "version.py")] if origin else None,
        "python": [sys.version, sys.executable],
        "platform": platform.platform(),
        "variables": {name: os.environ.get(name) for name in VARIABLES},
        "drivers": {path: _file(Path(path))[0] for path in DRIVER_FILES},
        "devices": {path: _listing(Path(path)) for path in DEVICE_FOLDERS},
        "nodes": [name for name in _listing(Path("/dev")) if name.startswith(DEVICE_NODES)],
    }


def _file(path: Path) -> list[str | int | None]:
    """A small file's text and modification time; [None, None] when it cannot be read."""
    try:
        return [path.read_text(errors="replace"), path.stat().st_mtime_ns]
    except OSError:
        return [None, None]


def _listing(folder: Path) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except OSError:
        return []


def _read(path: Path) -> tuple[dict[str, Any], Environment] | None:
    """The stored (fingerprint, environment), or None when there is none or it is not one this audit wrote."""
    try:
        record = json.loads(path.read_text())
        return record["fingerprint"], Environment.from_json(record["environment"])
    except (OSError, ValueError, KeyError, TypeError):
        return None

"""The facts of this machine that the acceptance run records, and selects its stages by.

``python -m bench.gpu.facts FILE`` writes them to FILE as JSON. The environment stage runs it in a process of its
own, so that a CUDA initialisation that hangs costs that stage's time and no more.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import platform
import shutil
import sys
from pathlib import Path


#: The packages the audit and its tests need, whose versions are recorded (None: not installed).
PACKAGES = ("click", "hypothesis", "numpy", "pathspec", "pytest", "pyyaml", "rich", "jsonschema")


def facts() -> dict:
    """Python, platform, torch and its CUDA, the GPU, triton, nvcc, whether jsonschema imports, where ``audit`` is
    imported from (the checkout, when the package is not installed), and the versions of :data:`PACKAGES`."""
    found = {"python": platform.python_version(), "platform": platform.platform(), "triton": _version("triton"),
             "nvcc": shutil.which("nvcc"), "jsonschema": _importable("jsonschema"), "audit": _audit(),
             "packages": {name: _version(name) for name in PACKAGES}}
    found.update(_torch())
    return found


def _torch() -> dict:
    try:
        import torch
    except ImportError as exc:
        return {"torch": None, "cuda": None, "cuda_available": False, "gpu": None,
                "why_no_cuda": f"torch cannot be imported ({exc})"}
    available = torch.cuda.is_available()
    return {"torch": str(torch.__version__), "cuda": torch.version.cuda, "cuda_available": available,
            "gpu": torch.cuda.get_device_name(0) if available else None,
            "why_no_cuda": "" if available else "no CUDA device here (torch.cuda.is_available() is False)"}


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _audit() -> str | None:
    try:
        import audit
    except ImportError:
        return None
    return str(Path(audit.__file__).resolve().parent)


if __name__ == "__main__":
    Path(sys.argv[1]).write_text(json.dumps(facts(), indent=2, sort_keys=True))

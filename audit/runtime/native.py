"""Native operators named in ``load``: prebuilt libraries, or C++/CUDA sources built with
torch.utils.cpp_extension into a build cache (rebuilt only when the sources, flags or torch change).

CUDA sources are built only where a CUDA device and toolchain exist; elsewhere the entry's CUDA cells
are skipped with the reason. A failed build is the entry's ``error``, with the compiler's first error
and the path of the full log.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from audit.core.errors import AuditError

SOURCES = (".cpp", ".cc", ".cxx", ".cu")
LIBRARIES = (".so", ".dylib", ".dll", ".pyd")
FLAGS = ("-O2",)
#: Where builds go unless AUDIT_BUILD_DIR says otherwise: beside the registry, with the result cache.
BUILD_DIR = Path(".audit-cache") / "build"


class NativeError(AuditError):
    """A native library could not be found, built or loaded."""


@dataclass(frozen=True)
class Native:
    """What was loaded: every file that went in (for the digest), and devices left without kernels."""

    files: tuple[Path, ...] = ()
    unbuilt: dict = field(default_factory=dict)


def is_native(item: str) -> bool:
    """Whether a ``load`` item is a library or a source file rather than a Python module."""
    return item.endswith(SOURCES + LIBRARIES)


def load(items, base: Path) -> Native:
    """Load the libraries and build and load the sources among ``items`` (paths relative to ``base``)."""
    import torch

    native = [base / item for item in items if is_native(item)]
    missing = [str(p) for p in native if not p.is_file()]
    if missing:
        raise NativeError(f"load: no such file {missing[0]}")
    for library in (p for p in native if p.suffix in LIBRARIES):
        try:
            torch.ops.load_library(str(library))
        except OSError as exc:
            raise NativeError(f"load: cannot load {library}: {exc}") from None
    sources = [p for p in native if p.suffix in SOURCES]
    unbuilt = {}
    cuda = [p for p in sources if p.suffix == ".cu"]
    if cuda:
        reason = cuda_missing()
        if reason:
            sources = [p for p in sources if p.suffix != ".cu"]
            unbuilt["cuda"] = f"CUDA sources not built ({', '.join(p.name for p in cuda)}): {reason}"
    if sources:
        build(sources, with_cuda=bool(cuda) and "cuda" not in unbuilt, base=base)
    return Native(files=tuple(native), unbuilt=unbuilt)


def build(sources: list[Path], *, with_cuda: bool, base: Path) -> Path:
    """Build ``sources`` into one extension and load it; returns its build folder."""
    import torch
    from torch.utils import cpp_extension

    digest = hashlib.sha256(f"{torch.__version__}|{FLAGS}|{with_cuda}".encode())
    for source in sources:
        digest.update(source.name.encode())
        digest.update(source.read_bytes())
    name = f"audit_{re.sub(r'[^0-9A-Za-z_]', '_', sources[0].stem)}_{digest.hexdigest()[:12]}"
    folder = Path(os.environ.get("AUDIT_BUILD_DIR") or base / BUILD_DIR) / name
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "build.log"
    with _exclusive(folder):
        try:
            cpp_extension.load(name, [str(s) for s in sources], extra_cflags=list(FLAGS),
                               build_directory=str(folder), is_python_module=False, with_cuda=with_cuda,
                               verbose=False)
        except Exception as exc:  # the compiler's or the linker's complaint, kept whole in the log
            log.write_text(str(exc))
            raise NativeError(f"building {', '.join(s.name for s in sources)} failed: {_first_error(str(exc))} "
                              f"(full log: {log})") from None
        log.write_text(f"built {name} from {', '.join(map(str, sources))}\n")
    return folder


@contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    """One process at a time builds in ``folder`` (a worker, or a builder started ahead:
    :mod:`audit.engine.prebuild`); the others wait, then find the build done. The lock is the kernel's
    (``flock``), released when its holder dies: torch's own lock is a file a killed build leaves behind, on which
    every later build waits forever, so once this one is held that file is stale and is removed."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): torch's own lock alone
        yield
        return
    with open(folder / "audit.lock", "w") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        (folder / "lock").unlink(missing_ok=True)
        yield


def cuda_missing() -> str:
    """Why CUDA sources cannot be built and run here ("" when they can)."""
    import torch
    from torch.utils import cpp_extension

    if torch.version.cuda is None:
        return "this torch is a CPU build (torch.version.cuda is None)"
    if not torch.cuda.is_available():
        return "no CUDA device (torch.cuda.is_available() is False)"
    if cpp_extension.CUDA_HOME is None:
        return "no CUDA toolchain (CUDA_HOME not found, no nvcc)"
    return ""


def _first_error(text: str) -> str:
    for line in text.splitlines():
        if "error:" in line or "Error:" in line:
            return line.strip()[:400]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0][:400] if lines else "(no message)"

"""Each worker slot's own JIT cache folders, kept between runs: no cache is shared between concurrent workers.

Libraries that compile on first use (Triton, Inductor, numba, C++-JIT packages writing under ``~/.cache``) keep what
they built in a cache folder. Two workers compiling the same kernel at once into one folder that the library does
not lock (or writes non-atomically) can each find the other's half-written file (``ImportError: file too short``),
and leave a broken one in the user's cache for every later process. So each worker slot (the index of a worker
among the ``-j`` running at once; a retired worker's replacement takes its slot) gets folders of its own, under the
audit's cache folder (``.audit-cache/jit/slot-N`` beside the registry, or under ``--cache-dir``): stable across
runs, so a second run finds what the first compiled and does not recompile (a cold cache changes verdicts: cells
time out while compiling), and the user's own cache folders are never written. torch's C++ extensions
(``TORCH_EXTENSIONS_DIR``) are built under a lock of torch's own: they share one folder, so each is built once.

Per slot rather than serialising first compiles: a compile happens inside a third-party library, which the audit
cannot make take a lock; per-slot folders need none (the decision: bench/history.md; bench/results.md, section 10,
measures them now).
"""

from __future__ import annotations

from pathlib import Path

#: The variables each slot points at its own folder, and the folder's name there.
PER_SLOT = {"XDG_CACHE_HOME": "xdg", "TRITON_CACHE_DIR": "triton", "NUMBA_CACHE_DIR": "numba",
            "TORCHINDUCTOR_CACHE_DIR": "inductor"}
#: The variables every slot shares (the library locks its own builds), unless the user set them.
SHARED = {"TORCH_EXTENSIONS_DIR": "torch_extensions"}


def root(base: str, cache_dir: str | None) -> Path:
    """The folder of every slot's JIT caches: ``jit`` in the audit's cache folder."""
    return Path(cache_dir or Path(base) / ".audit-cache").resolve() / "jit"


def slot_env(env: dict[str, str], folder: Path, slot: int) -> dict[str, str]:
    """``env`` with the JIT cache variables of worker slot ``slot`` pointed under ``folder``."""
    own = {name: str(folder / f"slot-{slot}" / sub) for name, sub in PER_SLOT.items()}
    shared = {name: str(folder / sub) for name, sub in SHARED.items() if name not in env}
    return {**env, **own, **shared}

"""The validation matrix (``audit-matrix/1``): built from results, summarised, gated, written atomically."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import tempfile
from pathlib import Path

from audit.contract import MATRIX_SCHEMA, Status
from audit.errors import OutputError
from audit.results.cells import Cell


def build(result, registry, seed: int) -> dict:
    """The matrix as the contract's JSON object."""
    entries = [_entry(r) for r in result.entries]
    cells = [Cell.from_json(c) for e in entries for c in e["cells"]]
    return {
        "schema": MATRIX_SCHEMA,
        "created": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "environment": environment(result.environment, registry, seed),
        "registry": repository_path(registry.path),
        "entries": entries,
        "summary": summary(cells),
        "verdict": verdict(cells, strict=False),
    }


def _entry(result) -> dict:
    entry = result.entry
    data = {"name": entry.name, "owner": list(entry.owners), "kind": entry.kind, "target": entry.target,
            "digest": result.digest, "line": entry.line, "cells": [c.to_json() for c in result.cells]}
    if result.target_error:
        data["target_error"] = result.target_error
    return data


def environment(workers: dict, registry, seed: int) -> dict:
    """The fingerprint: torch, Python, platform, CUDA, devices, git commit, registry digest, seed, and the
    run settings that change verdicts (examples per claimed cell, compile backend)."""
    return {"torch": workers.get("torch"), "python": workers.get("python"), "cuda": workers.get("cuda"),
            "devices": workers.get("devices", ["cpu"]), "platform": workers.get("platform"),
            "git_commit": git_commit(Path(registry.path).parent), "registry_sha256": registry.sha256,
            "seed": seed, "examples": workers.get("examples"), "compile_backend": workers.get("compile_backend")}


def repository_path(path: str) -> str:
    """``path`` relative to the repository's root (``$GITHUB_WORKSPACE`` in a GitHub job, else git's top
    level), as annotations and code scanning want it whatever ``--registry`` was given as; the path as
    given when it lies outside."""
    file = Path(path).resolve()
    root = os.environ.get("GITHUB_WORKSPACE") or _git(file.parent, "rev-parse", "--show-toplevel")
    if root:
        try:
            return file.relative_to(Path(root).resolve()).as_posix()
        except ValueError:
            pass
    return Path(path).as_posix()


def git_commit(folder: Path) -> str | None:
    """HEAD of the repository holding ``folder``, or None outside one."""
    return _git(folder, "rev-parse", "HEAD")


def _git(folder: Path, *args: str) -> str | None:
    """What ``git ARGS`` prints in ``folder``, or None (no git, not a repository)."""
    try:
        done = subprocess.run(["git", *args], cwd=folder or ".", capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def summary(cells) -> dict:
    """How many cells have each status (every status present, zeros included)."""
    counts = {status.value: 0 for status in Status}
    for cell in cells:
        counts[cell.status.value] += 1
    return counts


def gating(cells, strict: bool) -> list:
    """The cells that fail the gate (see :meth:`Cell.gates`)."""
    return [c for c in cells if c.gates(strict)]


def verdict(cells, strict: bool) -> str:
    """``pass`` or ``fail``."""
    return "fail" if gating(cells, strict) else "pass"


def cells_of(matrix: dict) -> list[Cell]:
    """Every cell of a matrix, as :class:`Cell` objects."""
    return [Cell.from_json(c) for e in matrix["entries"] for c in e["cells"]]


def dumps(matrix: dict) -> str:
    """Canonical text: sorted keys, two-space indent, trailing newline."""
    return json.dumps(matrix, indent=2, sort_keys=True) + "\n"


#: Metric names that measure the machine, not the code (they differ between two identical runs): a
#: check that records a time ends its name in ``_seconds``, a memory size in ``_mb``.
VOLATILE_SUFFIXES = ("_seconds", "_mb")


def volatile_metric(name: str) -> bool:
    """Whether a cell metric measures the machine (time, memory) rather than the code."""
    return name.endswith(VOLATILE_SUFFIXES)


def comparable(matrix: dict) -> dict:
    """``matrix`` without what differs between two runs on the same inputs and seed: ``created``, each
    cell's ``seconds`` and its volatile metrics. Two such runs give equal results."""
    stable = json.loads(json.dumps(matrix))
    stable.pop("created", None)
    for entry in stable.get("entries", []):
        for cell in entry.get("cells", []):
            cell.pop("seconds", None)
            metrics = cell.get("metrics")
            for name in [n for n in metrics or {} if volatile_metric(n)]:
                metrics.pop(name)
    return stable


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` via a temporary file and a rename: never half-written. An OS error
    (read-only folder, full disk) becomes an :class:`OutputError` naming the path."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # what open() would have given, not mkstemp's 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        os.unlink(tmp)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise

"""The validation matrix (``audit-matrix/1``) as one frozen :class:`Matrix`: built from results, summarised,
gated; JSON only at the edge (:meth:`Matrix.to_json`, :meth:`Matrix.from_json`, :func:`read_matrix`)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from audit.core.contract import MATRIX_SCHEMA, Status
from audit.core.errors import UsageError
from audit.core.io import json_text, read_json, utc_timestamp
from audit.registry.model import Entry, Registry
from audit.results.cells import Cell
from audit.results.environment import Environment
from audit.results.passthrough import missing, restore, unknown
from audit.runtime.options import RunOptions

#: The keys of the contract's entry object: always written (the first row), written when set (the second).
ENTRY_KEYS = ("name", "owner", "kind", "target", "digest", "cells")
ENTRY_OPTIONAL_KEYS = ("line", "target_error")
#: The keys of the matrix object this version models; ``entries`` is always written, the others when the
#: matrix has them (one built by a run has all but ``shard``).
MATRIX_KEYS = ("schema", "created", "environment", "registry", "entries", "summary", "verdict", "shard", "behaviour")


@dataclass(frozen=True)
class MatrixEntry:
    """One audited entry as the matrix records it: who owns it, where it is registered, its judged cells."""

    name: str
    owners: tuple[str, ...] = ()
    kind: str = ""
    target: str = ""
    digest: str | None = None
    cells: tuple[Cell, ...] = ()
    line: int | None = None
    target_error: str = ""
    #: Keys of the entry object this version does not model, kept as read.
    extra: dict[str, Any] = field(default_factory=dict)
    #: The always-written keys that the entry object read lacked (left out again when written).
    absent: frozenset[str] = field(default=frozenset(), compare=False, repr=False)

    @property
    def registry_line(self) -> int:
        """The entry's line in the registry (1 when the matrix does not record it)."""
        return 1 if self.line is None else self.line

    def to_json(self) -> dict[str, Any]:
        """The contract's entry object."""
        data: dict[str, Any] = {"name": self.name, "owner": list(self.owners), "kind": self.kind, "target": self.target,
                "digest": self.digest, "cells": [c.to_json() for c in self.cells]}
        if self.line is not None:
            data["line"] = self.line
        if self.target_error:
            data["target_error"] = self.target_error
        return restore(data, self.extra, self.absent)

    @staticmethod
    def from_json(data: dict[str, Any]) -> MatrixEntry:
        """The inverse of :meth:`to_json`."""
        return MatrixEntry(name=data["name"], owners=tuple(data.get("owner") or ()), kind=data.get("kind", ""),
                           target=data.get("target", ""), digest=data.get("digest"),
                           cells=tuple(Cell.from_json(c) for c in data.get("cells", ())), line=data.get("line"),
                           target_error=data.get("target_error", ""),
                           extra=unknown(data, ENTRY_KEYS + ENTRY_OPTIONAL_KEYS), absent=missing(data, ENTRY_KEYS))


@dataclass(frozen=True)
class Matrix:
    """The whole matrix: the run's fingerprint (``environment``), every entry with its cells, the count per
    status (``summary``) and the gate's ``verdict``; a shard's matrix also says which shard it is. The
    optional keys are None when a matrix read from a file does not have them."""

    entries: tuple[MatrixEntry, ...]
    environment: dict[str, Any] | None = None
    schema: str | None = MATRIX_SCHEMA
    created: str | None = None
    registry: str | None = None
    summary: dict[str, Any] | None = None
    verdict: str | None = None
    shard: dict[str, Any] | None = None
    #: A run with ``--record``: its behaviour record's manifest and every file's sha256 (:mod:`audit.behaviour.store`).
    behaviour: dict[str, Any] | None = None
    #: Keys of the matrix object this version does not model, kept as read.
    extra: dict[str, Any] = field(default_factory=dict)

    def cells(self) -> list[Cell]:
        """Every cell, in matrix order."""
        return [cell for _, cell in self.pairs()]

    def pairs(self) -> Iterator[tuple[MatrixEntry, Cell]]:
        """(entry, cell) for every cell, in matrix order."""
        return ((entry, cell) for entry in self.entries for cell in entry.cells)

    def judged(self, strict: bool, fail_unverified: bool = False) -> Matrix:
        """This matrix with its summary and its verdict under ``strict`` counted from its cells; with
        ``fail_unverified``, an entry that verified nothing (:meth:`unverified`) fails it too."""
        cells = self.cells()
        failed = verdict(cells, strict) == "fail" or (fail_unverified and bool(self.unverified()))
        return dataclasses.replace(self, summary=summary(cells), verdict="fail" if failed else "pass")

    def unverified(self) -> tuple[tuple[str, str], ...]:
        """(name, why) of each entry none of whose claimed cells ran to a verdict: every one a skip, ``why`` the first
        skip's reason. Such an entry passes the gate having proved nothing; every report names it."""
        found = []
        for entry in self.entries:
            claimed = [c for c in entry.cells if c.claimed]
            if claimed and all(c.status is Status.SKIP for c in claimed):
                found.append((entry.name, claimed[0].message.split("; ")[0]))
        return tuple(found)

    def to_json(self) -> dict[str, Any]:
        """The contract's matrix object."""
        data = {"entries": [e.to_json() for e in self.entries]}
        optional: dict[str, Any] = {"schema": self.schema, "environment": self.environment, "created": self.created,
                    "registry": self.registry, "summary": self.summary, "verdict": self.verdict, "shard": self.shard,
                                    "behaviour": self.behaviour}
        data.update((key, value) for key, value in optional.items() if value is not None)
        return restore(data, self.extra, frozenset())

    def to_text(self) -> str:
        """``matrix.json``'s text: sorted keys, two-space indent, trailing newline."""
        return json_text(self.to_json())

    @staticmethod
    def from_json(data: dict[str, Any]) -> Matrix:
        """The inverse of :meth:`to_json`: a key this version does not model is kept, and written back."""
        return Matrix(entries=tuple(MatrixEntry.from_json(e) for e in data.get("entries", ())),
                      environment=data.get("environment"),
                      schema=data.get("schema"), created=data.get("created"), registry=data.get("registry"),
                      summary=data.get("summary"), verdict=data.get("verdict"), shard=data.get("shard"),
                      behaviour=data.get("behaviour"), extra=unknown(data, MATRIX_KEYS))


def read_matrix(path: str) -> Matrix:
    """The matrix in the file ``path``, or a usage error that names the file and what is wrong with it."""
    data = read_json(path)
    if not isinstance(data, dict) or data.get("schema") != MATRIX_SCHEMA or not isinstance(data.get("entries"), list):
        raise UsageError(f"{path}: not an autograd-audit matrix (expected \"schema\": \"{MATRIX_SCHEMA}\" and "
                         "an \"entries\" list)")
    try:
        return Matrix.from_json(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:  # a required key missing, a wrong type
        raise UsageError(f"{path}: not a valid autograd-audit matrix: {type(exc).__name__}: {exc}") from None


class AuditedEntry(Protocol):
    """What the engine found for one entry (:class:`audit.engine.runner.EntryResult`)."""

    @property
    def entry(self) -> Entry: ...

    @property
    def digest(self) -> str | None: ...

    @property
    def cells(self) -> tuple[Cell, ...]: ...

    @property
    def target_error(self) -> str: ...


class Audited(Protocol):
    """What an engine run found (:class:`audit.engine.runner.RunResult`): each entry's cells, and the machine."""

    @property
    def entries(self) -> tuple[AuditedEntry, ...]: ...

    @property
    def environment(self) -> Environment: ...


def build(result: Audited, registry: Registry, options: RunOptions, strict: bool = False,
          shard: dict[str, Any] | None = None, fail_unverified: bool = False) -> Matrix:
    """The matrix of an engine run under ``options``, its verdict under ``strict`` (and ``fail_unverified``: see
    :meth:`Matrix.judged`); ``shard``: which shard of a split run it is."""
    return Matrix(entries=tuple(_entry(r) for r in result.entries),
                  environment=environment(result.environment, registry, options), created=utc_timestamp(),
                  registry=repository_path(registry.path), shard=shard).judged(strict, fail_unverified)


def _entry(result: AuditedEntry) -> MatrixEntry:
    entry = result.entry
    return MatrixEntry(name=entry.name, owners=tuple(entry.owners), kind=entry.kind.value, target=entry.target,
                       digest=result.digest, cells=tuple(result.cells), line=entry.line,
                       target_error=result.target_error or "")


def environment(machine: Environment, registry: Registry, options: RunOptions) -> dict[str, Any]:
    """The fingerprint: torch, Python, platform, CUDA, devices, git commit, registry digest, seed, and the
    run settings that change verdicts (examples per claimed cell, compile backend)."""
    return {**machine.to_json(), "git_commit": git_commit(Path(registry.path).parent),
            "registry_sha256": registry.sha256, "seed": options.seed, "examples": options.examples,
            "compile_backend": options.compile_backend}


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


def summary(cells: Iterable[Cell]) -> dict[str, int]:
    """How many cells have each status (every status present, zeros included)."""
    counts = {status.value: 0 for status in Status}
    for cell in cells:
        counts[cell.status.value] += 1
    return counts


def gating(cells: Iterable[Cell], strict: bool) -> list[Cell]:
    """The cells that fail the gate (see :meth:`Cell.gates`)."""
    return [c for c in cells if c.gates(strict)]


def verdict(cells: Iterable[Cell], strict: bool) -> str:
    """``pass`` or ``fail``."""
    return "fail" if gating(cells, strict) else "pass"


#: Metric names that measure the machine, not the code (they differ between two identical runs): a
#: check that records a time ends its name in ``_seconds``, a memory size in ``_mb``.
VOLATILE_SUFFIXES = ("_seconds", "_mb")


def volatile_metric(name: str) -> bool:
    """Whether a cell metric measures the machine (time, memory) rather than the code."""
    return name.endswith(VOLATILE_SUFFIXES)

"""Deterministic shards of a selection, and merging shard matrices back into the one unsharded matrix.

A shard is a set of entries (never part of one), so every cell is computed exactly as in an unsharded run:
per-cell seeds depend only on the run's seed and the cell. Shards are balanced greedily (longest first,
onto the lightest shard) by the durations an earlier matrix recorded, else by entry count.
"""

from __future__ import annotations

import dataclasses
import re

from audit.core.errors import UsageError
from audit.core.io import utc_timestamp
from audit.results.matrix import Matrix


def parse(text: str) -> tuple[int, int]:
    """``"K/N"`` (1 <= K <= N) to (K, N)."""
    found = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text or "")
    if not found or not 1 <= int(found.group(1)) <= int(found.group(2)):
        raise UsageError(f"--shard {text!r}: expected K/N with 1 <= K <= N, e.g. 2/4")
    return int(found.group(1)), int(found.group(2))


def durations(matrix: Matrix) -> dict[str, float]:
    """Seconds per entry recorded in a matrix (the sum over its cells)."""
    return {e.name: sum(c.seconds for c in e.cells) for e in matrix.entries}


def split(names: list[str], count: int, recorded: dict[str, float] | None = None) -> list[list[str]]:
    """``names`` into ``count`` shards, each in the original order. Unknown durations count as the mean
    of the known ones; with none known every entry weighs the same (round robin)."""
    recorded = recorded or {}
    known = [recorded[n] for n in names if n in recorded]
    default = sum(known) / len(known) if known else 1.0
    weight = {n: recorded.get(n, default) for n in names}
    order = sorted(range(len(names)), key=lambda i: (-weight[names[i]], i))
    loads = [0.0] * count
    members: list[list[int]] = [[] for _ in range(count)]
    for i in order:
        lightest = min(range(count), key=lambda s: (loads[s], s))
        loads[lightest] += weight[names[i]]
        members[lightest].append(i)
    return [[names[i] for i in sorted(m)] for m in members]


def merge(shards: list[tuple[str, Matrix]], strict: bool = False) -> Matrix:
    """One matrix from every shard's; a usage error when one is missing, repeated or disagrees."""
    if not shards:
        raise UsageError("no shard matrices given")
    infos = []
    for path, data in shards:
        info = data.shard
        if not isinstance(info, dict):
            raise UsageError(f"{path}: not a shard matrix (no \"shard\" key): run with --shard K/N")
        infos.append((path, info))
    count = infos[0][1]["count"]
    selected = infos[0][1]["selected"]
    seen: dict[int, str] = {}
    first_path, first = shards[0]
    for (path, info), (_, data) in zip(infos, shards):
        if info["count"] != count or info["selected"] != selected:
            raise UsageError(f"{path}: shard {info['index']}/{info['count']} is from another split than "
                             f"{first_path} ({count} shards)")
        if info["index"] in seen:
            raise UsageError(f"{path}: shard {info['index']}/{count} given twice (also {seen[info['index']]})")
        seen[info["index"]] = path
        ours, theirs = data.environment or {}, first.environment or {}
        for key in ("registry_sha256", *sorted(set(ours) | set(theirs))):
            if ours.get(key) != theirs.get(key):
                raise UsageError(f"{path}: environment differs from {first_path} at {key!r}: "
                                 f"{ours.get(key)!r} != {theirs.get(key)!r}")
    missing = sorted(set(range(1, count + 1)) - set(seen))
    if missing:
        raise UsageError(f"missing shard{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(f'{k}/{count}' for k in missing)}: nothing was merged")
    by_name = {entry.name: entry for _, data in shards for entry in data.entries}
    entries = tuple(by_name[name] for name in selected if name in by_name)
    # A shard's behaviour record covers its own entries: the merged matrix names none (audit diff compares shards).
    return dataclasses.replace(first, entries=entries, shard=None, created=utc_timestamp(),
                               behaviour=None).judged(strict)

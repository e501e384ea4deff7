"""Schedule independence, measured: every cell's status and message at ``-j 1`` against other schedules.

For this repository's registry and the benchmark registry: a ``-j 1`` run (the reference), ``-j 2``, ``-j 4``, and
two shard splits (2 and 3 shards, each shard at ``-j 2``, their cells put together); each schedule's cells are
compared with the reference's, by (entry, check, dtype, device), on status and message. Any difference is a bug.
Run: ``python -m bench.schedule [registry.yaml] [bench/registry.yaml]`` (both when none is named; prints a Markdown
table, then each difference; exit 1 if there is one).
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from bench.timing import REGISTRY, ROOT, audit_run, timed

REGISTRIES = {"`registry.yaml`": ROOT / "registry.yaml", "`bench/registry.yaml`": REGISTRY}
#: Each schedule: its name, and the runs that make it (the extra arguments of each).
SCHEDULES = {"-j 2": [["-j", "2"]], "-j 4": [["-j", "4"]],
             "2 shards (-j 2 each)": [["--shard", f"{k}/2", "-j", "2"] for k in (1, 2)],
             "3 shards (-j 2 each)": [["--shard", f"{k}/3", "-j", "2"] for k in (1, 2, 3)]}
COMMON = ["--no-cache"]

Cells = dict[tuple[str, str, str, str], tuple[str, str]]


def cells(registry: Path, out: Path, runs: list[list[str]]) -> tuple[Cells, float]:
    """Every cell of ``runs`` (one schedule) by (entry, check, dtype, device): (status, message); and the seconds."""
    found: Cells = {}
    seconds = 0.0
    for index, extra in enumerate(runs):
        folder = out / str(index)
        seconds += timed(audit_run(registry, folder, *COMMON, *extra))
        for entry in json.loads((folder / "matrix.json").read_text())["entries"]:
            for cell in entry["cells"]:
                found[(entry["name"], cell["check"], cell["dtype"], cell["device"])] = (cell["status"], cell["message"])
    return found, seconds


def differences(reference: Cells, other: Cells) -> list[str]:
    """Each cell whose status or message differs from the reference's (or that only one of them has)."""
    keys = sorted(set(reference) | set(other))
    return [f"{' '.join(k)}: -j 1 {reference.get(k)!r}, here {other.get(k)!r}" for k in keys
            if reference.get(k) != other.get(k)]


def measure(work: Path, only: list[str] | None = None) -> dict:
    """Each schedule's cells, seconds and differences from ``-j 1``, for each registry (``only``: the registries'
    names to run, ``registry.yaml`` or ``bench/registry.yaml``; all when empty)."""
    rows: list[tuple[str, str, int, float, int | None]] = []
    found: list[str] = []
    for name, registry in [(n, r) for n, r in REGISTRIES.items() if not only or n.strip("`") in only]:
        folder = work / registry.parent.name
        reference, seconds = cells(registry, folder / "j1", [["-j", "1"]])
        rows.append((name, "-j 1 (reference)", len(reference), seconds, None))
        for schedule, runs in SCHEDULES.items():
            other, seconds = cells(registry, folder / schedule.replace(" ", "_"), runs)
            differ = differences(reference, other)
            found += [f"{name} {schedule}: {d}" for d in differ]
            rows.append((name, schedule, len(other), seconds, len(differ)))
    return {"rows": rows, "differences": found}


def render(found: dict) -> list[str]:
    """The section's body, as lines: the table, then each difference (there should be none)."""
    return ["Every cell's status and message at `-j 1` (the reference) against `-j 2`, `-j 4` and two shard splits "
            "(2 and 3 shards, each at `-j 2`, their cells put together), `--no-cache`, default examples. Any "
            "difference is a bug.", "",
            "| registry | schedule | cells | seconds | **differences from -j 1** |", "|---|---|---|---|---|",
            *[f"| {name} | {schedule} | {count} | {seconds:.0f} | {'' if differ is None else f'**{differ}**'} |"
              for name, schedule, count, seconds, differ in found["rows"]], "",
            *[f"- {line}" for line in found["differences"]], *([""] if found["differences"] else [])]


def main(only: list[str]) -> int:
    """Print the section; exit 1 when a schedule differs."""
    with tempfile.TemporaryDirectory(prefix="audit-bench-schedule-") as folder:
        found = measure(Path(folder), only)
    print("\n".join(render(found)))
    return 1 if found["differences"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

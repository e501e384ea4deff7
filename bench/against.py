"""This checkout against another revision, paired: the default run of every check on the benchmark registry.

``python -m bench.against REV [--jobs N] [--check NAME ...]`` (from the repository root) makes a git worktree of
``REV`` in a temporary folder and runs ``audit run --no-cache -j N`` (default ``-j 2``; every check, or those named)
of each tree on its own benchmark registry, with the
same Python and torch (``PYTHONPATH`` points the other run at the worktree's package): a warm-up of each, then
``BENCH_PAIRS`` pairs (default 5), the order alternating. It prints both sides' medians, the median of the pairs'
wall and CPU ratios (this checkout over ``REV``), and every cell whose status differs between the two (a speed-up
must move no verdict). For changes made for speed: the result belongs in ``bench/history.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.timing import ENV, ROOT, Spent, audit_run, spent

PAIRS = int(os.environ.get("BENCH_PAIRS", "5"))


def measure(revision: str, jobs: int, work: Path, checks: tuple[str, ...] = ()) -> dict:
    """The pairs' (this, other) seconds and the cells whose status differs."""
    chosen = [arg for name in checks for arg in ("--check", name)]
    tree = work / "tree"
    subprocess.run(["git", "worktree", "add", "--detach", str(tree), revision], cwd=ROOT, check=True,
                   capture_output=True)
    try:
        env = {**ENV, "PYTHONPATH": os.pathsep.join(filter(None, [str(tree), ENV.get("PYTHONPATH")]))}

        def ours() -> Spent:
            return spent(audit_run(ROOT / "bench" / "registry.yaml", work / "this", "--no-cache", "-j", str(jobs),
                                   *chosen))

        def theirs() -> Spent:
            return spent(audit_run(tree / "bench" / "registry.yaml", work / "other", "--no-cache", "-j", str(jobs),
                                   *chosen), env=env, cwd=tree)

        ours(), theirs()  # warm-up
        pairs = []
        for k in range(PAIRS):
            if k % 2:
                other = theirs()
                pairs.append((ours(), other))
            else:
                pairs.append((ours(), theirs()))
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
    return {"pairs": [(a.wall, a.cpu, b.wall, b.cpu) for a, b in pairs],
            "differ": differing(_statuses(work / "this"), _statuses(work / "other"))}


def _statuses(out: Path) -> dict[tuple[str, str, str, str], str]:
    matrix = json.loads((out / "matrix.json").read_text())
    return {(e["name"], c["check"], c["dtype"], c["device"]): c["status"]
            for e in matrix["entries"] for c in e["cells"]}


def differing(this: dict, other: dict) -> list[str]:
    """Each cell whose status differs, or that one side lacks."""
    return [f"{' '.join(key)}: {other.get(key)} -> {this.get(key)}" for key in sorted(set(this) | set(other))
            if this.get(key) != other.get(key)]


def render(found: dict, revision: str, jobs: int, checks: tuple[str, ...] = ()) -> list[str]:
    """The comparison, as Markdown lines."""
    pairs = found["pairs"]
    median = [statistics.median(p[i] for p in pairs) for i in range(4)]
    wall = statistics.median(a / b for a, _, b, _ in pairs)
    cpu = statistics.median(a / b for _, a, _, b in pairs)
    which = ", ".join(checks) if checks else "every check"
    return [f"`audit run --no-cache -j {jobs}`, {which}, benchmark registry: this checkout against `{revision}`, "
            f"{len(pairs)} pairs after a warm-up, the order alternating; medians.", "",
            f"| | this checkout | `{revision}` | **ratio** (median of pairs) |", "|---|---|---|---|",
            f"| wall-clock (s) | {median[0]:.1f} | {median[2]:.1f} | **{wall:.2f}** |",
            f"| CPU, user and system (s) | {median[1]:.1f} | {median[3]:.1f} | **{cpu:.2f}** |", "",
            f"Cells whose status differs: {len(found['differ'])}", *[f"- {line}" for line in found["differ"]], ""]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.against", description=__doc__.splitlines()[0])
    parser.add_argument("revision")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--check", action="append", default=[], help="only this check (repeatable)")
    args = parser.parse_args(argv)
    checks = tuple(args.check)
    with tempfile.TemporaryDirectory(prefix="audit-bench-against-") as folder:
        found = measure(args.revision, args.jobs, Path(folder), checks)
    print("\n".join(render(found, args.revision, args.jobs, checks)))
    return 1 if found["differ"] else 0


if __name__ == "__main__":
    sys.exit(main())

"""Where the audit's time goes, check by check: the overhead benchmark's cells (the benchmark registry, the five
checks of ``bench.overhead.OVERHEAD_CHECKS``, on the CPU, the examples a run gives claimed and unclaimed cells),
each run in this process under cProfile as a worker runs it, their time split into the parts of a cell.

A part is the cumulative time of the functions that do it (``PARTS``); parts may nest (the target's calls happen
inside torch's gradcheck), so each is read on its own against the cells' total, never summed. Each part says
whether it is work by design (what the floor, ``bench/floor.py``, does too, or what the audit adds on purpose) or
repetition (the same values computed again).

Run: python -m bench.costs [--top N]   (prints a Markdown table; --top also prints the N costliest functions)
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
REGISTRY = ROOT / "bench" / "registry.yaml"

#: check -> the torch functions that are the check itself, what the floor (``bench/floor.py``) calls too.
TORCH_CHECKS = {
    "gradcheck": (("torch/autograd/gradcheck.py", "gradcheck"),),
    "gradgradcheck": (("torch/autograd/gradcheck.py", "gradgradcheck"), ("torch/autograd/gradcheck.py", "gradcheck")),
    "vmap": (("torch/_functorch/apis.py", "wrapped"), ("torch/_functorch/eager_transforms.py", "wrapper"),
             ("torch/_functorch/eager_transforms.py", "wrapper_fn")),
    "compile": (("torch/_dynamo/eval_frame.py", "_fn"),),
    "opcheck": (("torch/library.py", "opcheck"),),
}

#: (part, by design or repetition, the functions ``(file suffix, name)`` whose time it is; None: the check's own
#: torch functions, :data:`TORCH_CHECKS`).
PARTS = (
    ("torch's own check (what the floor runs)", "design", None),
    ("the target called through the audit's guard", "design", (("audit/runtime/subject.py", "evaluate"),)),
    ("special points (structured cases after the draws)", "design", (("audit/engine/explore.py", "_special"),)),
    ("a module's parameters by finite differences (the floor too)", "design",
     (("audit/checks/gradcheck.py", "parameter_differences"),)),
    ("compile's shape sweep, once a cell (compile time, recompiles)", "design",
     (("audit/checks/compile.py", "_prepare"),)),
    ("compile: each example against eager", "design", (("audit/checks/compile.py", "against_eager"),)),
    ("the vacuous-pass probe (did any output carry a gradient?)", "design",
     (("audit/engine/cell.py", "nothing_compared"),)),
    ("smoothness probes (a failure at a kink)", "design",
     (("audit/checking/smoothness.py", "excused"), ("audit/checking/smoothness.py", "excused_anywhere"))),
    ("the replay script written", "design", (("audit/engine/script.py", "replay_script"),)),
    ("Hypothesis drawing and bookkeeping (its own code's self time)", "design", (("hypothesis/", "*"),)),
    ("arguments built from the case", "repetition", (("audit/runtime/subject.py", "args"),)),
    ("the property's values worked out", "repetition", (("audit/checking/replayable.py", "values"),)),
)


def cells(checks: tuple[str, ...]):
    """(entry, check, key, claimed) for every CPU cell the overhead run has of ``checks``."""
    from audit.checks import builtin
    from audit.engine.plan import claims, plan
    from audit.registry.load import load_registry

    table = builtin()
    for entry in load_registry(REGISTRY).entries:
        keys = [key for key in plan(entry, table, only=checks) if key.device == "cpu"]
        for key, claimed in claims(entry, table, keys).items():
            yield entry, table[key.check], key, claimed


def profiled(checks: tuple[str, ...]) -> dict:
    """check -> (cells, seconds, pstats.Stats): every cell of ``checks`` run once under its check's profiler."""
    from audit.engine.cell import run_cell
    from audit.runtime.options import RunOptions
    from audit.runtime.target import resolve

    options, found, targets = RunOptions(base=str(ROOT)), {}, {}
    for entry, check, key, claimed in cells(checks):
        target = targets.setdefault(entry.name, resolve(entry, ROOT))
        profile = cProfile.Profile()
        start = time.perf_counter()
        profile.enable()
        run_cell(entry, target, check, key, options, claimed)
        profile.disable()
        count, seconds, stats = found.get(check.name, (0, 0.0, None))
        if stats is None:
            stats = pstats.Stats(profile)
        else:
            stats.add(profile)
        found[check.name] = (count + 1, seconds + time.perf_counter() - start, stats)
    return found


def _matches(key, functions) -> bool:
    filename, _, name = key
    path = filename.replace("\\", "/")
    return any(path.endswith(suffix) and name == wanted for suffix, wanted in functions if wanted != "*")


def part_seconds(stats: pstats.Stats, functions) -> float:
    """The seconds spent in ``functions``: their cumulative time less what they spent called from one another (a
    call of one from another counts once), or for a ``*`` name the self time of every function of that file part."""
    total = 0.0
    for key, (_, _, self_time, cumulative, callers) in stats.stats.items():  # type: ignore[attr-defined]
        path = key[0].replace("\\", "/")
        if any(suffix in path and wanted == "*" for suffix, wanted in functions):
            total += self_time
        elif _matches(key, functions):
            total += cumulative - sum(caller_stats[3] for caller, caller_stats in callers.items()
                                      if _matches(caller, functions))
    return total


def table(found: dict) -> str:
    """The Markdown table: a row per part, a column per check, seconds and share of the check's cells."""
    names = list(found)
    head = "| part | kind | " + " | ".join(f"{name} ({found[name][0]} cells, {found[name][1]:.1f} s)"
                                            for name in names) + " |"
    rows = [head, "|---|---|" + "---|" * len(names)]
    for part, kind, functions in PARTS:
        shares = []
        for name in names:
            seconds = part_seconds(found[name][2], functions or TORCH_CHECKS[name])
            shares.append(f"{seconds:.1f} s ({100 * seconds / found[name][1]:.0f}%)")
        rows.append(f"| {part} | {kind} | " + " | ".join(shares) + " |")
    return "\n".join(rows)


def measure(work: Path | None = None) -> dict:
    """:func:`profiled` over the overhead benchmark's checks (the work folder is not needed: nothing is written)."""
    from bench.overhead import OVERHEAD_CHECKS

    torch.set_num_threads(1)
    return profiled(tuple(OVERHEAD_CHECKS))


def render(found: dict) -> list[str]:
    """The section's body, as lines."""
    return ["The overhead run's cells (the five checks on the benchmark registry, the CPU, the run's example counts), "
            "each run in one process under cProfile as a worker runs it. A part is the time of the functions that do "
            "it, a call of one from another counted once; parts nest (the target is called inside torch's gradcheck), "
            "so each is read against its check's total, never summed. Seconds are cProfile's, inflated where Python "
            "code dominates: read the shares.", "", *table(found).splitlines(), ""]


def main(argv: list[str]) -> int:
    from bench.overhead import OVERHEAD_CHECKS

    parser = argparse.ArgumentParser(prog="python -m bench.costs")
    parser.add_argument("--top", type=int, default=0, help="also print the N costliest functions of each check")
    parser.add_argument("--check", action="append", help="profile only this check (repeatable)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    found = profiled(tuple(args.check or OVERHEAD_CHECKS))
    print(table(found))
    for name, (_, _, stats) in found.items() if args.top else ():
        print(f"\n## {name}")
        stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

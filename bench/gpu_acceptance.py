"""The device acceptance run: ``python -m bench.gpu_acceptance --out DIR``, from the checkout, on a machine with a
CUDA build of torch and a GPU. Nothing is installed and nothing is fetched: the checkout's code runs with this
Python, whose packages (torch, triton, hypothesis, click, pyyaml, rich, pathspec, numpy, pytest) must be there;
jsonschema may be absent (valid registries never need it).

Stages, in order, each with its own budget under one deadline (480 s by default): the machine's facts and both
registries validated; ``pytest -m gpu``; ``audit run --device cuda`` on ``registry.yaml``; the planted CUDA
registry (``bench/gpu/registry.yaml``), each bug beside its correct twin, held to :mod:`bench.gpu.plants`. Writes
``DIR/summary.json`` and ``DIR/summary.md`` (always, whatever a stage did) and each stage's logs and reports under
``DIR/stages/``. Exit 0 when every stage passed, 1 otherwise, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from bench.gpu import schedule, stages, summary
from bench.gpu.deadline import Deadline

ROOT = Path(__file__).resolve().parent.parent
#: The whole run's time: the issue's bound.
DEADLINE = 480.0


def main(argv: list[str] | None = None) -> int:
    """Run the chosen stages and write the summary; the exit code says whether every stage passed."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        chosen = stages.select(args.stage or ())
    except ValueError as exc:
        parser.error(str(exc))
    out = Path(args.out).resolve()
    ctx = stages.Context(root=ROOT, out=out, python=sys.executable, env=stages.child_env(ROOT, dict(os.environ)),
                         deadline=Deadline(time.monotonic(), args.deadline), jobs=args.jobs)
    result = schedule.acceptance(ctx, chosen)
    json_path, markdown_path = summary.write(result, out)
    for stage in result.stages:
        print(f"{stage.name:12} {stage.status.value:8} {stage.seconds:6.0f} s  {stage.detail}")
    print(f"GPU acceptance: {'PASS' if result.passed else 'FAIL'} in {result.seconds:.0f} s; {json_path}, "
          f"{markdown_path}")
    return result.exit_code


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench.gpu_acceptance", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="Folder for summary.json, summary.md and the stages' logs.")
    parser.add_argument("--stage", action="append", choices=[s.name for s in stages.STAGES],
                        help="Run only this stage after the environment (repeatable; default: all).")
    parser.add_argument("--deadline", type=float, default=DEADLINE, help="Seconds for the whole run (default 480).")
    parser.add_argument("--jobs", type=int, default=4, help="Worker processes and planted runs at once (default 4).")
    return parser


if __name__ == "__main__":
    sys.exit(main())

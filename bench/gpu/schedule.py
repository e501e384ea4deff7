"""The acceptance run in order: the environment first (the facts every other stage is selected by), then each
chosen stage with its allowance of the deadline. A stage that needs CUDA where there is none, or that would start
with too little time left, is a skip saying why; one that raises is an error saying what; the run goes on."""

from __future__ import annotations

import datetime
import traceback
from dataclasses import replace

from bench.gpu import deadline as deadlines
from bench.gpu import stages as stage_table
from bench.gpu.results import Status, StageResult, Summary
from bench.gpu.stages import Context, Stage


def acceptance(ctx: Context, chosen: tuple[Stage, ...], environment=stage_table.environment) -> Summary:
    """Run the environment stage, then ``chosen``, within ``ctx.deadline``; the summary of them all."""
    started, first = _now(), ctx.clock()
    facts: dict = {}

    def the_environment(context: Context, allowed: float) -> StageResult:
        result, found = environment(context, allowed)
        facts.update(found)
        return result

    later = sum(stage.budget for stage in chosen)
    results = [_timed(Stage("environment", stage_table.ENVIRONMENT_BUDGET, False, "", the_environment), ctx, "", later)]
    missing = stage_table.cuda_missing(facts)
    for index, stage in enumerate(chosen):
        results.append(_timed(stage, ctx, missing, sum(s.budget for s in chosen[index + 1:])))
    return Summary(started, round(ctx.clock() - first, 1), ctx.deadline.total, facts, tuple(results))


def _timed(stage: Stage, ctx: Context, cuda_missing: str, later: float) -> StageResult:
    """One stage's result, its seconds measured here; a skip when it cannot run, timed out when it overran.
    ``later``: the budgets of the stages after it, kept for them."""
    if stage.needs_cuda and cuda_missing:
        return StageResult(stage.name, Status.SKIPPED, f"not run: {cuda_missing}")
    begun = ctx.clock()
    allowed = ctx.deadline.allowance(stage.budget, begun, later)
    if not allowed:
        left = max(0.0, ctx.deadline.left(begun))
        return StageResult(stage.name, Status.SKIPPED, f"not run: {left:.0f} s left of the {ctx.deadline.total:.0f} s "
                                                       f"deadline, under the {deadlines.MINIMUM:.0f} s a stage needs")
    try:
        result = stage.run(ctx, allowed)
    except Exception as exc:  # the script's own fault: said, and the run goes on to write its summary
        result = StageResult(stage.name, Status.ERROR, f"the stage raised {type(exc).__name__}: {exc}",
                             tail=traceback.format_exc())
    seconds = ctx.clock() - begun
    if deadlines.overran(seconds, allowed) and result.status != Status.TIMED_OUT:
        said = f"{result.status.value}: {result.detail}"
        result = replace(result, status=Status.TIMED_OUT,
                         detail=f"ran {seconds:.0f} s, past its {allowed:.0f} s ({said})")
    return replace(result, seconds=round(seconds, 1))


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")

"""The acceptance run's order and time, with stand-in stages and a clock of our own: which stages run, the
allowance each gets of the deadline, a stage that overruns or raises, and the summary it always writes."""

from __future__ import annotations

import json
import sys

import pytest

from bench.gpu import stages, summary
from bench.gpu.deadline import GRACE, MINIMUM, Deadline
from bench.gpu.results import Status, StageResult
from bench.gpu.schedule import acceptance
from tests.helpers import ROOT

CUDA = {"cuda_available": True, "torch": "2.11.0+cu130", "cuda": "13.0", "gpu": "NVIDIA H200", "jsonschema": False}
NO_CUDA = {"cuda_available": False, "why_no_cuda": "no CUDA device here (torch.cuda.is_available() is False)"}


class Clock:
    """Seconds that pass only when a stand-in stage says so."""

    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def context(tmp_path, clock: Clock, total: float = 480.0) -> stages.Context:
    return stages.Context(root=ROOT, out=tmp_path, python=sys.executable, env={}, deadline=Deadline(0.0, total),
                          clock=clock)


def environment_giving(facts: dict, clock: Clock | None = None, takes: float = 2.0):
    def environment(ctx, allowed):
        if clock:
            clock.now += takes
        return StageResult("environment", Status.PASS, "facts read"), facts
    return environment


def stand_in(name: str, budget: float, clock: Clock, ran: list, takes: float = 10.0, overrun: bool = False):
    """A stage that records the allowance it got, then takes ``takes`` seconds (``overrun``: past its allowance)."""
    def run(ctx, allowed):
        ran.append((name, allowed))
        clock.now += allowed + GRACE + 1 if overrun else takes
        return StageResult(name, Status.PASS, f"{name} done")
    return stages.Stage(name, budget, True, name, run)


def test_with_no_stage_named_all_run_in_order_and_a_subset_keeps_that_order():
    assert [s.name for s in stages.select(())] == ["pytest", "registry", "planted"]
    assert [s.name for s in stages.select(["planted", "pytest"])] == ["pytest", "planted"]


def test_an_unknown_stage_is_refused_naming_the_stages():
    with pytest.raises(ValueError, match="unknown stage 'gpu'; the stages are pytest, registry, planted"):
        stages.select(["gpu"])


def test_without_cuda_the_cuda_stages_are_skips_that_say_why_and_never_run(tmp_path):
    clock, ran = Clock(), []
    chosen = (stand_in("pytest", 100, clock, ran), stand_in("planted", 100, clock, ran))
    result = acceptance(context(tmp_path, clock), chosen, environment=environment_giving(NO_CUDA))
    assert ran == []
    assert [(s.name, s.status) for s in result.stages] == [("environment", Status.PASS), ("pytest", Status.SKIPPED),
                                                           ("planted", Status.SKIPPED)]
    assert result.stages[1].detail == "not run: no CUDA device here (torch.cuda.is_available() is False)"
    assert result.exit_code == 1


def test_every_stage_passing_is_a_pass(tmp_path):
    clock, ran = Clock(), []
    chosen = (stand_in("pytest", 100, clock, ran), stand_in("planted", 100, clock, ran))
    result = acceptance(context(tmp_path, clock), chosen, environment=environment_giving(CUDA, clock))
    assert result.passed and result.exit_code == 0
    assert [s.seconds for s in result.stages] == [2.0, 10.0, 10.0] and result.seconds == 22.0


def test_a_stage_may_take_what_earlier_stages_left_unused_but_not_what_later_ones_need(tmp_path):
    clock, ran = Clock(), []
    chosen = (stand_in("pytest", 100, clock, ran, takes=10), stand_in("registry", 100, clock, ran, takes=40),
              stand_in("planted", 100, clock, ran))
    acceptance(context(tmp_path, clock), chosen, environment=environment_giving(CUDA, clock))
    # 470 s for stages (480 less the reserve), 2 s of them to the environment; 200 s kept for the last two stages
    assert ran == [("pytest", 268), ("registry", 358), ("planted", 418)]


def test_each_stage_gets_its_budget_cut_to_what_the_deadline_leaves(tmp_path):
    clock, ran = Clock(), []
    chosen = (stand_in("pytest", 100, clock, ran, takes=60), stand_in("registry", 100, clock, ran, takes=40),
              stand_in("planted", 100, clock, ran))
    total = 120.0  # the reserve (10 s) kept for the summary: 110 s for stages
    result = acceptance(context(tmp_path, clock, total), chosen, environment=environment_giving(CUDA, clock))
    assert ran == [("pytest", 100), ("registry", 48)]  # 110 - 2 - 60 left for the second
    planted = result.stages[-1]
    assert planted.status == Status.SKIPPED and planted.detail.startswith("not run: 8 s left of the 120 s deadline")
    assert f"under the {MINIMUM:.0f} s a stage needs" in planted.detail and result.exit_code == 1


def test_a_stage_that_overruns_its_allowance_is_timed_out_and_the_next_still_runs(tmp_path):
    clock, ran = Clock(), []
    chosen = (stand_in("pytest", 50, clock, ran, overrun=True), stand_in("planted", 100, clock, ran))
    result = acceptance(context(tmp_path, clock, total=200), chosen, environment=environment_giving(CUDA, clock))
    late = result.stages[1]  # allowed 88 s: 200 less the 10 s reserve, the environment's 2 s, the next stage's 100 s
    assert late.status == Status.TIMED_OUT and late.detail == "ran 109 s, past its 88 s (pass: pytest done)"
    assert ran[1] == ("planted", 79) and result.stages[2].status == Status.PASS and result.exit_code == 1


def test_a_stage_that_raises_is_an_error_and_the_run_goes_on(tmp_path):
    clock, ran = Clock(), []

    def broken(ctx, allowed):
        raise KeyError("counts")

    chosen = (stages.Stage("pytest", 100, True, "", broken), stand_in("planted", 100, clock, ran))
    result = acceptance(context(tmp_path, clock), chosen, environment=environment_giving(CUDA))
    assert result.stages[1].status == Status.ERROR and result.stages[1].detail == "the stage raised KeyError: 'counts'"
    assert "Traceback" in result.stages[1].tail and [name for name, _ in ran] == ["planted"]


def finished(tmp_path):
    clock, ran = Clock(), []
    failing = stages.Stage("planted", 100, True, "", lambda ctx, allowed: StageResult(
        "planted", Status.FAIL, "7 of 8 plants as expected", counts=(("met", 7), ("missed", 1)),
        problems=("side_stream: double_on_side_stream forward (cuda): expected fail, got pass",),
        command="python -m audit run ...", log="stages/planted", tail="last | line"))
    return acceptance(context(tmp_path, clock), (stand_in("pytest", 100, clock, ran), failing),
                      environment=environment_giving(CUDA))


def test_the_json_summary_has_every_stage_in_order_the_verdict_and_the_exit_code(tmp_path):
    document = json.loads(summary.to_json(finished(tmp_path)))
    assert document["schema"] == "gpu-acceptance/1" and document["verdict"] == "fail" and document["exit_code"] == 1
    assert [(s["name"], s["status"]) for s in document["stages"]] == [("environment", "pass"), ("pytest", "pass"),
                                                                       ("planted", "fail")]
    assert document["stages"][2]["counts"] == {"met": 7, "missed": 1} and document["facts"]["gpu"] == "NVIDIA H200"
    assert document["deadline_seconds"] == 480.0


def test_the_markdown_summary_has_a_row_per_stage_and_what_a_failed_stage_found(tmp_path):
    text = summary.to_markdown(finished(tmp_path))
    assert text.startswith("# GPU acceptance: FAIL\n\ntorch 2.11.0+cu130 (CUDA 13.0), triton None, GPU NVIDIA H200")
    assert "jsonschema not installed" in text
    assert "| planted | fail | 0 | 7 of 8 plants as expected |" in text
    assert "| pytest | pass | 10 | pytest done |" in text
    assert "## planted: fail" in text and "## pytest" not in text  # a pass says no more than its row
    assert "- side_stream: double_on_side_stream forward (cuda): expected fail, got pass" in text
    assert "```text\nlast | line\n```" in text and "Command: `python -m audit run ...`; log: `stages/planted`" in text


def test_a_pipe_in_a_detail_does_not_break_the_table(tmp_path):
    clock = Clock()
    piped = stages.Stage("pytest", 100, True, "", lambda ctx, allowed: StageResult("pytest", Status.PASS, "a | b"))
    text = summary.to_markdown(acceptance(context(tmp_path, clock), (piped,), environment=environment_giving(CUDA)))
    assert "| pytest | pass | 0 | a \\| b |" in text


def test_both_summaries_are_written_side_by_side(tmp_path):
    json_path, markdown_path = summary.write(finished(tmp_path), tmp_path / "out")
    assert json.loads(json_path.read_text())["verdict"] == "fail"
    assert markdown_path.read_text().startswith("# GPU acceptance: FAIL")
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"summary.json", "summary.md"}

"""Judging: claims, waivers and expiry turn raw outcomes into the contract's statuses."""

from __future__ import annotations

import pytest

from audit.core.contract import Status
from audit.registry.model import Entry, Expectation
from audit.results.cells import judge
from audit.results.outcome import ERRORED, HELD, SKIPPED, VIOLATED, CellKey, Outcome

KEY = CellKey("compile", "float64", "cpu")


def _entry(*waivers):
    return Entry(name="e", owners=("@o",), kind="function", target="m:F", inputs=(), expect=waivers)


def _judge(verdict, claimed, *waivers, today="2026-11-29"):
    outcome = Outcome(KEY, verdict, "broke", examples=7)
    return judge(_entry(*waivers), outcome, claimed=claimed, claim="supports.compile", today=today, repro="r")


@pytest.mark.parametrize("verdict, claimed, status", [
    (HELD, True, Status.PASS), (VIOLATED, True, Status.FAIL), (HELD, False, Status.XPASS),
    (VIOLATED, False, Status.UNSUPPORTED), (SKIPPED, True, Status.SKIP), (ERRORED, True, Status.ERROR),
    (ERRORED, False, Status.ERROR), (SKIPPED, False, Status.SKIP),
])
def test_status_without_waivers(verdict, claimed, status):
    assert _judge(verdict, claimed).status == status


def test_waiver_covers_a_failure_until_it_expires():
    waiver = Expectation("compile", "fail", "graph break, #123", until="2027-03-01")
    assert _judge(VIOLATED, True, waiver).status == Status.WAIVED
    expired = _judge(VIOLATED, True, waiver, today="2027-03-02")
    assert expired.status == Status.FAIL and "expired on 2027-03-01" in expired.message


def test_a_waived_check_that_holds_is_xpass():
    cell = _judge(HELD, True, Expectation("compile", "fail", "r"))
    assert cell.status == Status.XPASS and "remove the expect entry" in cell.message


def test_waiver_for_another_dtype_does_not_apply():
    assert _judge(VIOLATED, True, Expectation("compile", "fail", "r", dtype="float32")).status == Status.FAIL


def test_expected_skip_does_not_gate_under_strict():
    cell = _judge(SKIPPED, True, Expectation("compile", "skip", "no GPU in CI"))
    assert cell.status == Status.SKIP and cell.expected
    from audit.results.matrix import gating
    assert gating([cell], strict=True) == []
    assert gating([_judge(SKIPPED, True)], strict=True)


def test_errors_are_never_waived():
    assert _judge(ERRORED, True, Expectation("compile", "fail", "r")).status == Status.ERROR


def test_unclaimed_xpass_says_how_to_claim():
    assert "supports.compile: true" in _judge(HELD, False).message
    probe = Outcome(CellKey("dtype", "bfloat16", "cpu"), HELD, "", examples=5)
    cell = judge(_entry(), probe, claimed=False, claim="supports.dtypes", today="2026-11-29", repro="r")
    assert cell.message.endswith("claim it by adding bfloat16 to supports.dtypes")  # not "supports.dtypes: true"


@pytest.mark.parametrize("status, strict, gates", [
    (Status.PASS, True, False), (Status.FAIL, False, True), (Status.ERROR, False, True),
    (Status.SKIP, False, False), (Status.SKIP, True, True), (Status.XPASS, True, True),
    (Status.WAIVED, True, False), (Status.UNSUPPORTED, True, False),
])
def test_gate(status, strict, gates):
    assert status.gates(strict) is gates


@pytest.mark.parametrize("verdict, strict, gates", [
    (ERRORED, False, False), (ERRORED, True, False), (VIOLATED, True, False), (SKIPPED, True, False),
    (HELD, False, False), (HELD, True, True),
])
def test_an_unclaimed_cell_never_gates_except_xpass_under_strict(verdict, strict, gates):
    """A probe that crashes or hangs (error) is recorded, not gated; --strict still asks to raise a claim."""
    from audit.results.matrix import gating

    cell = _judge(verdict, False)
    assert bool(gating([cell], strict=strict)) is gates


def test_a_claimed_error_still_gates():
    from audit.results.matrix import gating

    assert gating([_judge(ERRORED, True)], strict=False)


@pytest.mark.parametrize("claimed, waivers, status", [(True, (), Status.PASS), (False, (), Status.XPASS),
                                                      (True, (Expectation("compile", "fail", "r"),), Status.XPASS)])
def test_a_cell_that_held_on_part_of_its_check_says_which_part_it_judged(claimed, waivers, status):
    """The engine's message on a held outcome says what was judged where a part could not run: the cell keeps it."""
    said = "judged the non-strict export only; the strict (Dynamo) export did not run: not traced (torch 2.11.0)"
    outcome = Outcome(KEY, HELD, said, examples=7)
    cell = judge(_entry(*waivers), outcome, claimed=claimed, claim="supports.compile", today="2026-11-29", repro="r")
    assert cell.status == status and cell.message.endswith(said), cell.message
    whole = judge(_entry(), Outcome(KEY, HELD, examples=7), claimed=True, claim="", today="2026-11-29", repro="r")
    assert whole.status == Status.PASS and whole.message == ""  # all of it ran: nothing to say

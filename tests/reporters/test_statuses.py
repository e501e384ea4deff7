"""Every status is shown from one table: each has a row, and the orders reports list them in are derived from it."""

from __future__ import annotations

from audit.core.contract import Status
from audit.reporters.statuses import FILTERS, PRESENTATION, SEVERITY, junit_statuses, symbol
from audit.reporters.terminal import LEGEND, mark


def test_every_status_has_one_row_and_every_order_lists_each_once():
    assert set(PRESENTATION) == set(Status)
    for order in (SEVERITY, FILTERS):
        assert sorted(order) == sorted(Status) and len(order) == len(Status)
    assert len({shown.symbol for shown in PRESENTATION.values()}) == len(Status)


def test_a_group_shows_its_worst_and_a_report_offers_what_gates_first():
    assert SEVERITY == (Status.ERROR, Status.FAIL, Status.XPASS, Status.SKIP, Status.WAIVED, Status.UNSUPPORTED,
                        Status.PASS)
    assert FILTERS[:2] == (Status.FAIL, Status.ERROR) and FILTERS[2:] == SEVERITY[2:]


def test_a_terminal_cell_names_what_fails_the_gate():
    assert [mark(s) for s in (Status.PASS, Status.FAIL, Status.ERROR, Status.XPASS)] == ["✓", "✗ FAIL", "! ERROR",
                                                                                         "+"]
    assert LEGEND == "✓ pass  ✗ fail  ! error  – unsupported  w waived  + xpass  s skip  · no cell"


def test_junit_elements_and_unknown_statuses():
    assert junit_statuses("failure") == {Status.FAIL} and junit_statuses("error") == {Status.ERROR}
    assert junit_statuses("skipped") == {Status.SKIP, Status.UNSUPPORTED, Status.WAIVED}
    assert symbol("fail") == "✗" and symbol("someday") == "?"

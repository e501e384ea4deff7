"""``audit repro``'s choice of a stored case."""

from __future__ import annotations

import pytest

from audit.commands.repro import _nth_case
from audit.core.contract import Status
from audit.core.errors import UsageError
from audit.results.cells import Cell, CellFailure

CASE = {"dims": {}, "args": []}


def _cell(*failures: CellFailure) -> Cell:
    return Cell("gradcheck", "float64", "cpu", Status.FAIL, True, case=CASE, failures=failures)


def test_the_first_failure_is_the_cells_own_case():
    assert _nth_case(_cell(), 1) == CASE


def test_a_further_failure_without_its_case_is_a_usage_error_not_a_crash():
    """A matrix written by hand or by another tool may leave a failure's case out: nothing to replay, said so."""
    cell = _cell(CellFailure("first", CASE), CellFailure("second"))
    with pytest.raises(UsageError, match="failure 2 has no stored case"):
        _nth_case(cell, 2)
    with pytest.raises(UsageError, match="--failure 3 is not one of them"):
        _nth_case(cell, 3)

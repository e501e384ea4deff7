"""One vocabulary, once (issue 20): the check names, the dtypes and the Markdown escaping each have one source,
and an exception without a message is reported with a word, never as the audit's own IndexError."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from audit.checks import builtin_names
from audit.catalog.checks import _DECLARATIONS, CATALOG, _by_name
from audit.core.contract import DTYPE_ORDER, NUMERIC_PREFERENCE
from audit.core.errors import InternalError, first_line
from audit.reporters.changes import render_markdown
from audit.results.changes import diff
from audit.results.matrix import Matrix
from audit.results.outcome import HELD, VIOLATED
from tests.helpers import entry, observe

CUBE = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, "supports": {"forward_ad": True}}


#: The check names released so far, in their column order: a user-facing format (reports and diffs compare across
#: versions), so a check is only ever appended to the catalog, never inserted, renamed or removed. Never edit this
#: list but to append what a release shipped.
RELEASED = ("forward", "gradcheck", "gradgradcheck", "forward_ad", "undefined_grad", "empty", "determinism", "dtype",
            "device", "noncontiguous", "alias", "saved_tensors", "vmap", "compile", "autocast", "checkpoint",
            "opcheck", "export", "distributed", "state_dict", "train_step", "accumulation", "partial_grad",
            "shared_grad", "statistics")


def test_the_built_in_checks_are_the_catalogs_names_in_its_order():
    assert builtin_names() == tuple(CATALOG) == tuple(check.name for check in _DECLARATIONS)


def test_released_check_names_keep_their_columns():
    assert tuple(CATALOG)[:len(RELEASED)] == RELEASED


def test_a_check_declared_twice_is_the_audits_bug():
    with pytest.raises(InternalError, match="declared twice"):
        _by_name(_DECLARATIONS + (_DECLARATIONS[1],))


def test_numeric_preference_orders_exactly_the_contracts_dtypes():
    assert sorted(NUMERIC_PREFERENCE) == sorted(DTYPE_ORDER) and len(set(NUMERIC_PREFERENCE)) == len(DTYPE_ORDER)


def _dtype_lists(node):
    """Every dtype enumeration of the schema: an enum holding float64, or the keys of properties that do."""
    if isinstance(node, list):
        if "float64" in node:
            yield node
        for item in node:
            yield from _dtype_lists(item)
    elif isinstance(node, dict):
        if "float64" in node:
            yield list(node)
        for value in node.values():
            yield from _dtype_lists(value)


def test_the_shipped_schema_lists_the_contracts_floating_dtypes_in_its_order():
    schema = json.loads(resources.files("audit.schema").joinpath("registry.schema.json").read_text())
    lists = list(_dtype_lists(schema))
    assert len(lists) == 8  # inputs' dtype, supports.dtypes, tolerance keys, expect's dtype: in defaults and entries
    for names in lists:
        assert [n for n in names if re.fullmatch(r"b?float\d+|complex\d+", n)] == list(DTYPE_ORDER), names


def test_first_line_of_an_exception_without_a_message_says_so():
    assert first_line(NotImplementedError()) == "(no message)"
    assert first_line(RuntimeError("  \n")) == "(no message)"
    assert first_line(RuntimeError("\nfirst\nsecond")) == "first"


def test_a_bare_not_implemented_jvp_fails_forward_ad_with_a_message(tmp_path):
    found = observe(entry(tmp_path, target="tests.fixtures.vocabulary:CubeBareJvp", **CUBE), "forward_ad", examples=5)
    assert found.verdict == VIOLATED, found.message
    assert found.message.startswith("no forward-mode formula: (no message) (define a jvp"), found.message
    assert "IndexError" not in found.message


def test_the_bare_jvps_correct_twin_passes_forward_ad(tmp_path):
    found = observe(entry(tmp_path, target="tests.fixtures.broken:CubeJvp", **CUBE), "forward_ad", examples=5)
    assert found.verdict == HELD, found.message


def _matrix(status: str, message: str, owner: str = "@o") -> Matrix:
    cell = {"check": "gradcheck", "dtype": "float64", "device": "cpu", "status": status, "claimed": True,
            "message": message, "repro": "python r.py", "seed": 0, "examples": 1, "seconds": 0.0}
    entries = [{"name": "a", "owner": [owner], "digest": "d", "cells": [cell]}]
    return Matrix.from_json({"schema": "audit-matrix/1", "verdict": "fail" if status == "fail" else "pass",
                             "environment": {}, "entries": entries})


def test_a_diffs_markdown_escapes_a_message_as_the_reports_do():
    markdown = render_markdown(diff(_matrix("pass", ""), _matrix("fail", "got <Tensor> | `x` & y\nthen")))
    assert "| got &lt;Tensor&gt; \\| 'x' &amp; y then |" in markdown, markdown


def test_a_diffs_markdown_escapes_an_owner_as_the_reports_do():
    owner = "@team <img src=x> | `y`"
    markdown = render_markdown(diff(_matrix("pass", "", owner), _matrix("fail", "wrong", owner)))
    assert "owner @team &lt;img src=x&gt; \\| 'y'" in markdown, markdown
    assert "<img" not in markdown

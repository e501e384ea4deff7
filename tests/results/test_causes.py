"""Failing cells grouped by cause: (check, declared kind), refined by the message with numbers, shapes and names
masked; a raising site's line kept; the likely fix read from declarations, never from a message."""

from __future__ import annotations

from audit.reporters.causes import builtin_fixes, grouped, listed
from audit.results.causes import causes, mask
from audit.results.matrix import Matrix
from tests.reporters.sample import _case, _cell, _entry, matrix, typed

GRADIENT = "gradient of input 1: max |analytic - numeric| = {} at index (0, {}) (analytic {}, numeric 0.5); on ([{}])"


def _matrix(*entries) -> Matrix:
    return typed({**matrix(), "entries": list(entries)})


def _grad(n: int, kind: str = "gradient of input 1", check: str = "gradcheck", **extra) -> dict:
    return _cell(check, "float64", "cpu", "fail", GRADIENT.format(n + 0.5, n, n, n), kind=kind, **extra)


def test_numbers_shapes_dims_and_the_entrys_name_are_masked_and_a_raising_site_is_kept():
    assert mask("output 0 of cube: 1.5e-3 > 1e-10 at [2, 3] (0, 1); on ([4]) with B=2, N=3", ["cube"]) == \
        "output # of <name>: # > # at [#] (#); on ([#]) with dims"
    assert mask("raised RuntimeError (at pkg/ops.py:41)") == "raised RuntimeError (at pkg/ops.py:41)"
    assert mask("float64 and bfloat16 in[0]") == "float64 and bfloat16 in[#]"


def test_cells_whose_messages_differ_only_in_numbers_are_one_cause_whatever_the_entry():
    found = causes(_matrix(_entry("a", ["@x"], 1, [_grad(1), _grad(2)]), _entry("b", ["@y"], 2, [_grad(7)])))
    assert len(found) == 1 and found[0].entries == ("a", "b") and found[0].owners == ("@x", "@y")
    assert len(found[0].members) == 3 and found[0].kind == "gradient of input #"


def test_another_kind_check_or_raising_site_is_another_cause():
    sites = [_cell("compile", "float64", "cpu", "fail", f"raised RuntimeError: no (at pkg/ops.py:{line})",
                   kind=f"raised RuntimeError (at pkg/ops.py:{line})") for line in (41, 97)]
    cells = [_grad(1), _grad(2, kind="output 0"), _grad(3, check="forward_ad"), *sites]
    found = causes(_matrix(_entry("a", ["@x"], 1, cells)))
    assert len(found) == 5
    assert found[3].title == "compile: raised RuntimeError (at pkg/ops.py:41) — no"  # the site said once, in the kind
    other_input = causes(_matrix(_entry("a", ["@x"], 1, [_grad(1), _grad(2, kind="gradient of input 0")])))
    assert len(other_input) == 1  # the kind's numbers are masked too: which input is a detail of the cell


def test_the_smallest_shrunk_case_is_listed_first_its_replay_the_one_to_run():
    cells = [_grad(n, case=_case([n, 3])) for n in (5, 2, 9, 4)]
    cells = [dict(c, dtype=d) for c, d in zip(cells, ("float64", "float32", "float16", "bfloat16"))]
    [cause] = causes(_matrix(_entry("a", ["@x"], 1, cells)))
    assert cause.smallest.cell.dtype == "float32"
    shown, hidden = listed(cause)
    assert [m.cell.dtype for m in shown] == ["float32", "float64", "float16"] and hidden == 1


def test_the_likely_fix_comes_from_the_checks_declaration_for_that_kind_not_from_the_message():
    declared = grouped(_matrix(_entry("a", ["@x"], 1, [_grad(1)])))
    assert declared[0].fix == builtin_fixes()[("gradcheck", "gradient of input #")] and declared[0].fix
    undeclared = grouped(_matrix(_entry("a", ["@x"], 1, [_grad(1, kind="")])))  # an older matrix: no kind
    assert len(undeclared) == 1 and undeclared[0].fix == "" and undeclared[0].kind == ""
    timed_out = _cell("vmap", "float64", "cpu", "error", "timed out after 3 s", kind="error: timed out")
    assert "--timeout" in grouped(_matrix(_entry("a", ["@x"], 1, [timed_out])))[0].fix


def test_one_raising_site_is_one_cause_in_every_check_that_met_it():
    raised = [_cell(check, "float64", "cpu", "fail", "raised TypeError: forward() missing 1 argument (at pkg/ops.py:5)"
                    f"; on ([{n}])", kind="raised TypeError (at pkg/ops.py:5)", case=_case([n]))
              for n, check in enumerate(("forward", "gradcheck", "dtype"), 1)]
    found = causes(_matrix(_entry("a", ["@x"], 1, raised)))
    assert len(found) == 1 and found[0].checks == ("forward", "gradcheck", "dtype"), found
    assert found[0].title.startswith("forward, gradcheck, dtype: raised TypeError (at pkg/ops.py:5)"), found[0].title


def test_where_a_failure_showed_is_no_part_of_its_cause():
    shapes = [_cell("dtype", "float64", "cpu", "fail", f"output 0 is float32 for float64 inputs; on ({shape})",
                    kind="output 0", case=_case([1])) for shape in ("[1]", "[1, 1], 2.0", "[2] sparse_coo (1 of 2)")]
    found = causes(_matrix(*[_entry(name, ["@x"], i, [cell]) for i, (name, cell) in enumerate(zip("abc", shapes))]))
    assert len(found) == 1 and found[0].entries == ("a", "b", "c"), [c.title for c in found]
    assert "on (" not in found[0].title

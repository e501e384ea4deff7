"""One group per root cause, whatever checks it broke: an entry that cannot be loaded is one cause for every cell of
it (and of every entry of the same missing package), claimed or not; one raising site is one cause whatever each
check was doing when it met it. And entries that verified nothing are named, and fail under --strict or
fail_unverified."""

from __future__ import annotations

from audit.reporters import markdown
from audit.reporters.causes import rule_id
from audit.reporters.common import headline
from audit.results.causes import Tier, causes
from audit.results.matrix import Matrix
from tests.reporters.sample import _cell, _entry, matrix, typed

CHECKS = ("forward", "gradcheck", "gradgradcheck", "undefined_grad", "dtype", "vmap", "compile", "checkpoint")
NOT_LOADED = "error: target could not be loaded"


def _gone(name: str, module: str, package: str) -> dict:
    message = (f"target could not be loaded: cannot import module '{module}': ModuleNotFoundError: No module named "
               f"'{package}'")
    cells = [_cell(check, dtype, "cpu", "error", message, claimed=dtype == "float64", kind=NOT_LOADED)
             for check in CHECKS for dtype in ("float64", "float16")]
    return _entry(name, ["@pkg"], 1, cells)


def _raises(name: str) -> dict:
    site = "(at /site/pkg/ops.py:6 in _unpack)"
    cells = [_cell(check, "float64", "cpu", "fail", f"raised RuntimeError: view size is not compatible {site}",
                   kind=f"raised RuntimeError {site}") for check in ("gradcheck", "compile", "checkpoint")]
    cells.append(_cell("undefined_grad", "float64", "cpu", "fail",
                       "backward through output 1 alone (the other 1 output gradient(s) undefined, i.e. None in "
                       f"backward) raised RuntimeError: view size is not compatible {site}; handle None grad_outputs",
                       kind="backward through output # alone raised RuntimeError"))
    return _entry(name, ["@pkg"], 2, cells)


def _skipped(name: str) -> dict:
    return _entry(name, ["@gpu"], 3, [_cell(check, "float64", "cuda", "skip", "CUDA is not available here; x")
                                      for check in ("forward", "gradcheck")])


def _matrix(*entries) -> Matrix:
    return typed({**matrix(), "entries": list(entries)})


def test_entries_that_cannot_be_loaded_are_one_cause_per_missing_package_across_checks_and_tiers():
    found = causes(_matrix(_gone("a", "pkg_a.ops", "pkg_a"), _gone("b", "pkg_a.layers", "pkg_a"),
                           _gone("c", "pkg_b", "pkg_b")))
    assert [c.entries for c in found] == [("a", "b"), ("c",)]
    first = found[0]
    assert len(first.members) == 2 * len(CHECKS) * 2 and first.checks == CHECKS
    assert first.tier is Tier.ERROR and first.dtypes == ("float64", "float16")  # its most severe cell decides
    assert "No module named '<name>'" not in first.pattern and "pkg_a" in first.pattern
    assert rule_id(first).startswith("not-loaded/")


def test_one_raising_site_is_one_cause_whatever_the_check_was_doing_when_it_met_it():
    (found,) = causes(_matrix(*[_raises(name) for name in ("p", "q", "r", "s", "t")]))
    assert found.entries == ("p", "q", "r", "s", "t")
    assert found.checks == ("gradcheck", "compile", "checkpoint", "undefined_grad")
    assert found.kind == "raised RuntimeError (at /site/pkg/ops.py:6 in _unpack)"
    assert rule_id(found).startswith("raised/")


def test_causes_are_ordered_by_entries_then_cells():
    found = causes(_matrix(_raises("p"), _gone("a", "pkg_a.ops", "pkg_a"), _gone("b", "pkg_a.ops", "pkg_a"),
                           _raises("q"), _raises("r")))
    assert [c.entries for c in found] == [("p", "q", "r"), ("a", "b")]  # failures first, then errors


def test_the_markdown_report_names_every_failing_entry_and_stays_short():
    entries = [_gone(f"gone{i}", f"pkg_{i % 2}.ops", f"pkg_{i % 2}") for i in range(6)]
    entries += [_raises(f"raises{i}") for i in range(14)]
    text = markdown.render(_matrix(*entries))
    for entry in entries:
        assert entry["name"] in text
    assert sum(len(e["cells"]) for e in entries) >= 150
    assert len(text.splitlines()) <= 200 + len(entries)  # the per-entry table's rows, then about 200 lines


def test_entries_that_verified_nothing_are_named_in_the_headline_and_fail_when_asked():
    data = _matrix(_raises("p"), _skipped("gpu_only"))
    assert data.unverified() == (("gpu_only", "CUDA is not available here"),)
    line = headline(data.judged(strict=False))
    assert "1 entry verified nothing" in line and "gpu_only (CUDA is not available here)" in line
    assert data.judged(strict=False).verdict == "fail"  # p fails anyway
    alone = _matrix(_skipped("gpu_only"))
    assert alone.judged(strict=False).verdict == "pass"
    assert alone.judged(strict=False, fail_unverified=True).verdict == "fail"
    assert alone.judged(strict=True).verdict == "fail"

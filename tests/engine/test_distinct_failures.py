"""A cell reports every distinct failure it finds (up to MAX_FAILURES), each shrunk by a search of its own,
each with its own replay script; a cell that holds is searched once."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from types import SimpleNamespace

import pytest
from click.testing import CliRunner
from hypothesis import strategies as st

from audit.catalog.interface import Violation
from audit.cli import cli
from audit.engine import explore as explore_mod
from audit.engine.explore import MAX_FAILURES, explore
from audit.reporters import github, html, junit, markdown, sarif, terminal
from audit.results.cells import Cell, judge
from audit.results.outcome import HELD, VIOLATED, outcome_from_json, outcome_to_json
from tests.helpers import ROOT, entry, observe
from tests.reporters.sample import matrix, typed

T = "tests.fixtures.two_bugs"
WRONG, RAISES = "gradient of input 0 is wrong", "raised ValueError: not supported"


# Hypothesis also draws the literals of every local module, these tests' included: they keep to floats other
# tests use already (0.5, 0.1), so that collecting them adds none to the draws of others.

def _two_bugs(x: float) -> None:
    """A wrong gradient above 0.5, a refusal for small positive values; 0 passes."""
    if x > 0.5:
        raise Violation(WRONG)
    if 0 < x < 0.1:
        raise Violation(RAISES)


def _failures(found) -> dict:
    return {found.message: found.case, **{o.message: o.case for o in found.others}}


# Exploring: pure Python properties, no torch.

def test_a_second_kind_is_found_and_shrunk_on_its_own_search():
    found = explore(_two_bugs, st.floats(0, 1), examples=50, seed_value=1, budget=60)
    failures = _failures(found)
    assert sorted(failures) == sorted([WRONG, RAISES]) and len(found.others) == 1
    assert failures[WRONG] == 1 and 0 < failures[RAISES] < 0.1  # each shrunk within its own kind


def test_without_a_budget_or_a_shrink_one_failure_is_reported():
    assert not explore(_two_bugs, st.floats(0, 1), examples=50, seed_value=1).others
    assert not explore(_two_bugs, st.floats(0, 1), examples=50, seed_value=1, budget=60, shrink=False).others


def test_at_most_max_failures_distinct_kinds_are_reported():
    def five(x: float) -> None:
        raise Violation("kind " + "ABCDE"[min(4, int(x * 5))])

    found = explore(five, st.floats(0, 1), examples=50, seed_value=1, budget=60)
    kinds = [found.message] + [o.message for o in found.others]
    assert len(kinds) == MAX_FAILURES == len(set(kinds))


@pytest.mark.parametrize("at_zero", [False, True])
def test_a_failure_that_does_not_fail_again_is_reported_once_as_not_deterministic(at_zero):
    """Found by the first search (0 passes; the smallest positive floats come early) or by a further one
    (the wrong gradient shows at 0 too, the first example drawn)."""
    seen = set()

    def flaky(x: float) -> None:
        if x > 0.5 or (at_zero and x == 0):
            raise Violation(WRONG)
        if 0 < x < 0.1 and x not in seen:  # fails once per value
            seen.add(x)
            raise Violation(RAISES)

    found = explore(flaky, st.floats(0, 1), examples=50, seed_value=1, budget=60)
    messages = sorted([found.message] + [o.message for o in found.others])
    assert len(messages) == 2 and messages[0] == WRONG, messages
    assert messages[1] == RAISES + explore_mod.FLAKY  # reported once: its kind is known, whatever it adds


def test_out_of_memory_in_a_further_search_keeps_the_failures_found():
    calls = []

    def counted(x: float) -> None:
        calls.append(x)
        _two_bugs(x)

    explore(counted, st.floats(0, 1), examples=50, seed_value=1)
    first_search = len(calls)

    def blows_up_later(x: float) -> None:
        calls.append(x)
        if len(calls) > first_search:  # in the second search
            raise MemoryError("cannot allocate")
        _two_bugs(x)

    calls.clear()
    found = explore(blows_up_later, st.floats(0, 1), examples=50, seed_value=1, budget=60)
    assert not found.held and found.others == ()  # the second search blew up: the first failure stands


def test_a_further_search_past_its_deadline_ends_at_once_keeping_the_failure_it_found(monkeypatch):
    """A clock that ticks once per call: half the budget runs out on the call after the further search
    found the second kind; it reports that kind and runs nothing more."""
    calls = []

    def timed(x: float) -> None:
        calls.append(x)
        _two_bugs(x)

    monkeypatch.setattr(explore_mod, "time", SimpleNamespace(perf_counter=lambda: len(calls)))
    first = explore(timed, st.floats(0, 1), examples=50, seed_value=1)
    first_search = len(calls)
    calls.clear()
    explore(timed, st.floats(0, 1), examples=50, seed_value=1, budget=10 ** 9)
    unbounded = len(calls)
    other = RAISES if first.message == WRONG else WRONG
    found_at = next(i for i, x in enumerate(calls, 1) if i > first_search and _kind_of(x) == other)
    calls.clear()
    found = explore(timed, st.floats(0, 1), examples=50, seed_value=1, budget=2 * found_at)
    assert [o.message for o in found.others] == [other]
    assert len(calls) == found_at + 1 < unbounded


def _kind_of(x: float) -> str:
    try:
        _two_bugs(x)
    except Violation as exc:
        return str(exc)
    return ""


# One cell, in process: the planted Function with two bugs, its one-bug sibling, its correct twin.

def _searches(monkeypatch) -> list:
    """Count the Hypothesis searches explore runs."""
    searches, search = [], explore_mod._search
    monkeypatch.setattr(explore_mod, "_search", lambda *a, **k: searches.append(1) or search(*a, **k))
    return searches


def _cell(tmp_path, target: str):
    return entry(tmp_path, target=f"{T}:{target}", inputs=[{"shape": ["N"]}], supports={"dtypes": ["float64"]})


#: Runs each script given in this one process; prints their exit codes.
RUN_ALL = """
import json, runpy, sys
codes = []
for path in sys.argv[1:]:
    try:
        runpy.run_path(path, run_name="__main__")
        codes.append(0)
    except SystemExit as exc:
        codes.append(exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1)
    except Exception:
        codes.append(1)
print(json.dumps(codes))
"""


def _exit_codes(tmp_path, scripts: list[str]) -> list[int]:
    paths = []
    for i, text in enumerate(scripts):
        paths.append(tmp_path / f"replay{i}.py")
        paths[-1].write_text(text)
    done = subprocess.run([sys.executable, "-c", RUN_ALL, *map(str, paths)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_bugs_in_one_cell_are_both_reported_each_shrunk_each_replayed(tmp_path, monkeypatch):
    searches = _searches(monkeypatch)
    found = observe(_cell(tmp_path, "TwoBugs"), "gradcheck", failures=3)
    assert found.verdict == VIOLATED and found.message.startswith("Jacobian mismatch"), found.message
    assert found.case["args"][0]["values"] == [1.0]  # the wrong branch, x > 0.5, shrunk to one element
    [other] = found.others
    assert other.message.startswith("raised ValueError: cube backward: inputs below -0.5"), other.message
    assert other.case["args"][0]["values"] == [-1.0] and Violation(other.message).kind != Violation(found.message).kind
    assert len(searches) == 3  # the first, the second kind's, and one that found no third
    fixed = [s.replace(f"{T}.TwoBugs.apply", f"{T}.CubeFastPath.apply") for s in (found.script, other.script)]
    assert fixed != [found.script, other.script]
    assert _exit_codes(tmp_path, [found.script, other.script, *fixed]) == [1, 1, 0, 0]


def test_a_cell_with_one_bug_reports_exactly_one_failure(tmp_path, monkeypatch):
    searches = _searches(monkeypatch)
    found = observe(_cell(tmp_path, "FastPathWrong"), "gradcheck", failures=3)
    assert found.verdict == VIOLATED and found.others == () and len(searches) == 2


def test_the_correct_twin_holds_after_a_single_search(tmp_path, monkeypatch):
    searches = _searches(monkeypatch)
    found = observe(_cell(tmp_path, "CubeFastPath"), "gradcheck", failures=3)
    assert found.verdict == HELD and found.others == () and len(searches) == 1


# Carried through: the outcome, the cache, the cell, the reporters.

def test_further_failures_survive_the_cache_and_an_old_record_still_loads(tmp_path):
    found = observe(_cell(tmp_path, "TwoBugs"), "gradcheck", examples=10, failures=3)
    assert found.others and outcome_from_json(json.loads(json.dumps(outcome_to_json(found)))) == found
    old = outcome_to_json(found)
    del old["others"]
    assert outcome_from_json(old).others == ()
    cell = judge(_cell(tmp_path, "TwoBugs"), found, claimed=True, claim="", today="2026-01-01", repro="audit repro",
                 replays=("python out/repro/a.py", "python out/repro/a-2.py"))
    data = cell.to_json()
    assert [f["repro"] for f in data["failures"]] == ["python out/repro/a.py", "python out/repro/a-2.py"]
    assert data["failures"][0]["message"] == data["message"] and data["failures"][1]["case"] == found.others[0].case
    assert Cell.from_json(data) == replace(cell, seconds=data["seconds"])
    assert cell.scripts() == (found.script, found.others[0].script)
    one = judge(_cell(tmp_path, "TwoBugs"), found.__class__(found.key, VIOLATED, "m"), claimed=True, claim="",
                today="2026-01-01", repro="r")
    assert "failures" not in one.to_json()


def test_each_failures_declared_kind_travels_to_the_cache_the_cell_and_the_matrix_json(tmp_path):
    """The kind the search found each failure by (the cause reports group by) is carried, not re-read from text."""
    found = observe(_cell(tmp_path, "TwoBugs"), "gradcheck", examples=10, failures=3)
    [other] = found.others
    assert found.kind == "Jacobian mismatch for output 0 with respect to input 0" and other.kind != found.kind
    assert other.kind.startswith("raised ValueError (at ") and other.kind.endswith(")")
    record = outcome_to_json(found)
    assert outcome_from_json(json.loads(json.dumps(record))) == found
    del record["kind"], record["others"][0]["kind"]  # a record cached before kinds: none, still loads
    assert outcome_from_json(record).kind == "" and outcome_from_json(record).others[0].kind == ""
    data = judge(_cell(tmp_path, "TwoBugs"), found, claimed=True, claim="", today="2026-01-01", repro="r").to_json()
    assert data["kind"] == found.kind and [f["kind"] for f in data["failures"]] == [found.kind, other.kind]
    assert Cell.from_json(data).kind == found.kind and Cell.from_json(data).failures[1].kind == other.kind
    held = judge(_cell(tmp_path, "TwoBugs"), found.__class__(found.key, HELD), claimed=True, claim="",
                 today="2026-01-01", repro="r")
    assert "kind" not in held.to_json()


def _with_a_second_failure():
    data = matrix()
    cell = data["entries"][0]["cells"][1]
    cell["failures"] = [{"message": cell["message"], "case": cell["case"], "repro": "python out/repro/c.py"},
                        {"message": "raised ValueError: refused", "case": None, "repro": "python out/repro/c-2.py"}]
    return typed(data)


def test_every_reporter_shows_the_further_failure_and_its_own_replay():
    data = _with_a_second_failure()
    texts = {"terminal": terminal.render(data, width=140), "markdown": markdown.render(data),
             "html": html.render(data).split("<h2>Matrix</h2>")[0], "junit": junit.render(data),
             "annotations": github.annotations(data),
             "summary": github.summary(data), "sarif": json.loads(sarif.render(data))["runs"][0]["results"][0]
             ["message"]["text"]}
    for name, text in texts.items():
        assert "raised ValueError: refused" in text and "python out/repro/c-2.py" in text, name
        assert "python out/repro/c.py" not in text, name  # the first is replayed by the cell's own repro


# The command line: two scripts written, merged, and none left once fixed.

def _run(registry, out, *args):
    return CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--check", "gradcheck",
                                    "--progress", "off", "-j", "1", "--examples", "10", *args])


def test_run_writes_a_script_per_failure_merge_copies_them_and_a_fixed_rerun_leaves_none(write_registry, tmp_path):
    def registry(target):
        return write_registry([{"name": "two", "owner": "@t", "target": f"{T}:{target}", "inputs": [{"shape": ["N"]}],
                                "supports": {"dtypes": ["float64"]}}])

    shard, merged = tmp_path / "shard", tmp_path / "merged"
    red = _run(registry("TwoBugs"), shard, "--shard", "1/1")
    names = ["two__gradcheck__float64__cpu.py", "two__gradcheck__float64__cpu-2.py"]  # the first failure first
    assert red.exit_code == 1 and sorted(p.name for p in (shard / "repro").iterdir()) == sorted(names)
    cell = json.loads((shard / "matrix.json").read_text())["entries"][0]["cells"][0]
    assert [f["repro"] for f in cell["failures"]] == [f"python {shard / 'repro' / n}" for n in names]
    assert "\n      also: " in red.output and f"repro: python {shard / 'repro' / names[1]}\n" in red.output
    joined = CliRunner().invoke(cli, ["merge", str(shard / "matrix.json"), "--out", str(merged)])
    assert joined.exit_code == 1 and sorted(p.name for p in (merged / "repro").iterdir()) == sorted(names)
    cell = json.loads((merged / "matrix.json").read_text())["entries"][0]["cells"][0]
    assert cell["failures"][1]["repro"] == f"python {merged / 'repro' / names[1]}"
    replay = ["repro", "two", "gradcheck", "--registry", str(registry("TwoBugs")),
              "--matrix", str(merged / "matrix.json")]
    second = CliRunner().invoke(cli, [*replay, "--failure", "2"])  # audit repro agrees with the -2 script
    assert second.exit_code == 1 and f"FAIL: {cell['failures'][1]['message'][:40]}" in second.output, second.output
    assert CliRunner().invoke(cli, [*replay, "--failure", "3"]).exit_code == 2
    green = _run(registry("CubeFastPath"), shard)
    assert green.exit_code == 0 and not list((shard / "repro").iterdir())

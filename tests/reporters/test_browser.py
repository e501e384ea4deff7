"""The HTML report of a registry with many failures, seen in a real browser: headless Chromium at 1280x800 lays it
out, a small script measures where the causes are, and the layout must be one a team can read (not pixels: fonts and
Chromium versions move those)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess

import pytest

from audit.reporters import html
from tests.reporters.sample import many, typed

pytestmark = pytest.mark.slow

WIDTH, HEIGHT = 1280, 800

#: Measures the page once laid out, into <pre id="layout"> (what --dump-dom prints back).
MEASURE = """<script>
(function () {
  var box = function (e) { var r = e.getBoundingClientRect();
    return {top: r.top + scrollY, bottom: r.bottom + scrollY, left: r.left, right: r.right}; };
  var out = {width: innerWidth, scroll: document.documentElement.scrollWidth, causes: [], cells: []};
  document.querySelectorAll('section.failures details.cause').forEach(function (d) {
    var title = d.querySelector(':scope > summary');
    out.causes.push({box: box(d), title: box(title), font: parseFloat(getComputedStyle(title).fontSize),
                     open: d.open, text: title.textContent});
  });
  document.querySelectorAll('section.failures details.failure').forEach(function (d) {
    out.cells.push({open: d.open, shown: d.checkVisibility()});
  });
  var pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if not found:
        pytest.skip("chromium is not installed here (apt-get install -y chromium)")
    return found


def _layout(browser: str, page, tmp_path) -> dict:
    path = tmp_path / "matrix.html"
    path.write_text(page.replace("</body>", MEASURE + "\n</body>"))
    flags = ["--headless", "--no-sandbox", "--disable-gpu", f"--window-size={WIDTH},{HEIGHT}",
             "--hide-scrollbars"]
    subprocess.run([browser, *flags, f"--screenshot={tmp_path / 'matrix.png'}", path.as_uri()],
                   capture_output=True, timeout=120, check=False)  # kept beside the page, for a person to look at
    dom = subprocess.run([browser, *flags, "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=120,
                         check=True).stdout
    found = re.search(r'<pre id="layout">(.*?)</pre>', dom, re.S)
    assert found, dom[-2000:]
    return json.loads(found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">")
                      .replace("&amp;", "&"))


def test_a_report_of_many_failures_reads_at_1280x800_one_group_per_cause(tmp_path):
    """160 failing cells of 6 causes: six groups, open, in order, none overlapping another or wider than the
    window; their titles in a readable size; the first three on the first screens; each cause's cells folded to
    their one line and beyond the third folded away entirely."""
    layout = _layout(_chromium(), html.render(typed(many())), tmp_path)
    causes = layout["causes"]
    assert layout["width"] == WIDTH and layout["scroll"] <= WIDTH, "the page scrolls sideways at 1280 px"
    assert len(causes) == 6 and all(c["open"] for c in causes)
    assert [c["text"].split(". ", 1)[0].split()[-1] for c in causes] == ["1", "2", "3", "4", "5", "6"]
    for cause in causes:
        assert 0 <= cause["box"]["left"] and cause["box"]["right"] <= WIDTH, cause["text"]
        assert cause["title"]["right"] <= cause["box"]["right"] and cause["font"] >= 12, cause["text"]
        assert cause["box"]["bottom"] - cause["box"]["top"] < HEIGHT / 2, f"a cause fills a screen: {cause['text']}"
    assert all(a["box"]["bottom"] <= b["box"]["top"] for a, b in itertools.pairwise(causes))
    assert causes[0]["box"]["top"] < HEIGHT / 2 and causes[2]["title"]["top"] < 2 * HEIGHT
    assert not any(c["open"] for c in layout["cells"])
    assert sum(c["shown"] for c in layout["cells"]) == 6 * 3  # three per cause, the rest inside "N more cells"
    assert (tmp_path / "matrix.png").exists()

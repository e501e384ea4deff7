"""Replays of failures found on third-party code: what the audit saw in its worker, a fresh process sees too.

The compile check on xitorch 0.5.1's solve failed in a full run (8 graphs for 4 shapes) and held in its replay
script and in ``audit repro``: the target compiles differently once it has run eagerly, and in a full run the
checks before compile have always run it. The fixtures (tests/fixtures/replay_thirdparty.py) plant that first
eager call effect: the compile verdict must not depend on it, and the script must replay it from a cold start.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from audit.checks import builtin
from audit.engine.cell import cell_seed
from audit.engine.replay import replay_case
from audit.inputs.case import Case
from audit.results.outcome import HELD, VIOLATED
from audit.runtime.options import RunOptions
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from tests.fixtures import replay_thirdparty
from tests.helpers import ROOT, entry, observe

M = "tests.fixtures.replay_thirdparty"
BATCH = {"kind": "callable", "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 5], "N": [1, 3]},
         "supports": {"compile": True}}


def _cell(tmp_path, name: str, warm: bool):
    """The compile cell of ``name`` from a cold module (as a fresh process imports it), or after one eager call
    (as in a full run, where the checks before compile call it)."""
    replay_thirdparty.reset()
    if warm:
        getattr(replay_thirdparty, name)(__import__("torch").ones(1, 2))
    chosen = entry(tmp_path, name=name, target=f"{M}:{name}", **BATCH)
    return chosen, observe(chosen, "compile", examples=2)


@pytest.mark.parametrize("warm", [False, True], ids=["cold", "warm"])
def test_compile_verdict_does_not_depend_on_an_earlier_eager_call(tmp_path, warm):
    """Cold or warm, the target that specialises a size once its cache exists fails; its twin holds."""
    _, outcome = _cell(tmp_path, "cached_scale_by_size", warm)
    assert outcome.verdict == VIOLATED, outcome.message
    assert "recompiled for every new shape" in outcome.message
    assert _cell(tmp_path, "cached_scale", warm)[1].verdict == HELD


def test_cold_replays_agree_with_the_cell(tmp_path):
    """The cell failed after the target ran eagerly; ``audit repro``'s replay and the script, both starting
    cold, fail too, and the script with the twin swapped in exits 0."""
    chosen, outcome = _cell(tmp_path, "cached_scale_by_size", warm=True)
    assert outcome.verdict == VIOLATED, outcome.message
    replay_thirdparty.reset()
    seed = cell_seed(0, chosen.name, "compile", "float64", "cpu")
    subject = Subject(chosen, resolve(chosen, ROOT), "float64", "cpu", seed, RunOptions(examples=2, base=str(ROOT)))
    assert "recompiled for every new shape" in replay_case(builtin()["compile"], subject, Case.from_json(outcome.case))
    bug = tmp_path / "bug.py"
    bug.write_text(outcome.script)
    twin = tmp_path / "twin.py"
    twin.write_text(outcome.script.replace(f"{M}.cached_scale_by_size", f"{M}.cached_scale"))
    codes = [subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=300)
             for path in (bug, twin)]  # each in a fresh interpreter: the module cold, as a user runs it
    assert codes[0].returncode == 1, codes[0].stdout + codes[0].stderr
    assert "recompiled for every new shape" in codes[0].stdout
    assert codes[1].returncode == 0, codes[1].stdout + codes[1].stderr

"""Every failure replays: for every planted bug in the suite (``tests/replay``), the cell fails, its standalone
replay script exits 1 and ``audit repro``'s replay fails on the shrunk case; with the correct twin swapped in,
the same script exits 0 and the replay holds. All scripts run in one fresh interpreter (one torch import)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from audit.checks import builtin
from audit.engine.replay import replay_case
from audit.inputs.case import Case
from audit.results.outcome import VIOLATED
from audit.runtime.options import RunOptions, cell_seed
from audit.runtime.subject import Subject
from audit.runtime.target import resolve
from tests.helpers import ROOT, entry, observe
from tests.replay import Planted, not_replayed, rows
from tests.versions import reachable

pytestmark = pytest.mark.slow  # one observation per planted bug, then ~170 scripts in a fresh interpreter

ROWS = rows()
#: Every fixture module: a new one is inventoried without anyone remembering to list it.
#: Fixture modules; triton_kernels needs the triton package (it is in the test extra where wheels exist).
FIXTURES = tuple(sorted(p.stem for p in (Path(__file__).parent / "fixtures").glob("*.py") if p.stem != "__init__"
                        and (p.stem not in ("triton_kernels", "triton_half") or importlib.util.find_spec("triton"))))


@pytest.fixture(scope="module")
def replayed(request, tmp_path_factory) -> dict:
    """Row id -> (outcome, bug replay, twin replay, bug script result, twin script result), for the rows this
    session runs (``-k forward`` observes and replays the forward rows only)."""
    folder = tmp_path_factory.mktemp("replay")
    chosen = {item.callspec.params["row"].id for item in request.session.items
              if hasattr(item, "callspec") and "row" in item.callspec.params}
    selected = [row for row in ROWS if row.id in chosen]
    found = {row.id: _observe(folder, row) for row in selected}
    scripts = {}
    for row in selected:
        outcome = found[row.id][0]
        if outcome.script:
            scripts[(row.id, "bug")] = outcome.script
            scripts[(row.id, "twin")] = swap(outcome.script, row)
    results = run_scripts(folder, scripts)
    return {row.id: (*found[row.id], results.get((row.id, "bug")), results.get((row.id, "twin"))) for row in selected}


def _observe(folder: Path, row: Planted):
    bug = entry(folder, target=row.bug, **row.spec)
    outcome = observe(bug, row.check, row.dtype)
    if outcome.verdict != VIOLATED:
        return outcome, "", ""
    case = Case.from_json(outcome.case)
    return outcome, _replay(bug, row, case), _replay(entry(folder, target=row.twin, **row.spec), row, case)


def _replay(chosen, row: Planted, case: Case) -> str:
    options = RunOptions(examples=20, seed=0, base=str(ROOT))
    seed = cell_seed(0, chosen.name, row.check, row.dtype, "cpu")
    subject = Subject(chosen, resolve(chosen, ROOT), row.dtype, "cpu", seed, options)
    return replay_case(builtin()[row.check], subject, case)


def swap(script: str, row: Planted) -> str:
    """The script with the twin in place of the bug (its import added)."""
    if row.spec.get("kind") == "op":  # "namespace::name": both ops come with the entry's load modules
        old, new = _op_path(row.bug), _op_path(row.twin)
        assert old in script, f"the script does not call {old}"
        return script.replace(old, new)
    (module, name), (twin_module, twin_name) = row.bug.split(":"), row.twin.split(":")
    old, new = f"{module}.{name}", f"{twin_module}.{twin_name}"
    assert old in script, f"the script does not call {old}"
    fixed = script.replace(old, new)
    return fixed.replace("import torch\n", f"import torch\nimport {twin_module}\n", 1)


def _op_path(target: str) -> str:
    namespace, _, name = target.partition("::")
    return f"torch.ops.{namespace}.{name}"


def run_scripts(folder: Path, scripts: dict) -> dict:
    """Exit code and output of each script, run as files by ``tests/replay/driver.py`` in one interpreter."""
    paths = {}
    for i, (key, text) in enumerate(scripts.items()):
        path = folder / f"script_{i}.py"
        path.write_text(text)
        paths[str(path)] = key
    done = subprocess.run([sys.executable, str(Path(__file__).parent / "replay" / "driver.py"), *paths],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)
    results = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert len(results) == len(paths), done.stdout[-3000:] + done.stderr[-3000:]
    return {paths[r["path"]]: r for r in results}


@pytest.mark.parametrize("row", [pytest.param(r, marks=reachable(r.bug, r.check), id=r.id) for r in ROWS])
def test_every_failure_replays_and_the_twin_passes(replayed, row):
    outcome, bug_replay, twin_replay, bug_script, twin_script = replayed[row.id]
    assert outcome.verdict == VIOLATED, outcome.message
    assert row.words in outcome.message, outcome.message
    assert bug_replay, "audit repro's replay does not fail on the shrunk case"
    assert not twin_replay, f"audit repro's replay fails the twin: {twin_replay}"
    assert bug_script["code"] == 1, bug_script["output"]
    assert twin_script["code"] == 0, twin_script["output"]


def test_every_planted_fixture_is_replayed_or_says_why_not():
    """A planted bug without a row would go unreplayed: every public fixture is a bug, a twin, or has a reason."""
    named = {r.bug for r in ROWS} | {r.twin for r in ROWS} | set(not_replayed())
    missing = [name for name in fixture_names() if name not in named]
    assert not missing, f"fixtures with no replay row and no written reason: {missing}"
    assert all(reason.strip() for reason in not_replayed().values())


@cache
def fixture_names() -> tuple[str, ...]:
    """Every public class and function defined in the fixture modules, as "module:Name"."""
    names = []
    for short in FIXTURES:
        module = importlib.import_module(f"tests.fixtures.{short}")
        for name, value in vars(module).items():
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__ and (
                    inspect.isclass(value) or inspect.isfunction(value)):
                names.append(f"{module.__name__}:{name}")
    return tuple(names)

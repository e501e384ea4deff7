"""No verdict depends on a message's wording: with every message a check's code returns upper-cased (its kind and
family kept, :class:`audit.kit.compare.Finding`), every planted bug still fails and every correct twin still does not.

A check that decided by its own text (``found[0].startswith("compiled gradient")``) would change its verdict here:
the upper-cased text no longer starts with the words it looks for."""

from __future__ import annotations

import functools
import importlib
import inspect
import pkgutil
from dataclasses import replace

import pytest

import audit.checking
import audit.checks
import audit.toolkit
from audit.checks import builtin_names
from audit.kit.compare import Finding
from audit.results.outcome import VIOLATED
from tests.helpers import entry, observe
from tests.replay import rows
from tests.versions import reachable

pytestmark = pytest.mark.slow  # every planted bug and its twin observed once more

#: Module-level functions that return something other than findings as a list of strings.
NOT_FINDINGS = {"run"}


def reworded(line):
    """``line`` in other words (upper case): a :class:`Finding` keeps its kind and family."""
    if isinstance(line, Finding):
        return line.worded(line.upper())
    return line.upper()


def rewording(function):
    """``function``, its findings (a list of strings it returns) reworded; anything else it returns as it is."""
    @functools.wraps(function)
    def call(*args, **kwargs):
        found = function(*args, **kwargs)
        if isinstance(found, list) and found and all(isinstance(line, str) for line in found):
            return [reworded(line) for line in found]
        return found

    return call


def _modules():
    """Every module of the checking code: the checks, the checking machinery (judgement, replayable...) and the
    toolkit."""
    for package in (audit.checks, audit.checking, audit.toolkit):
        for info in pkgutil.iter_modules(package.__path__):
            yield importlib.import_module(f"{package.__name__}.{info.name}")


@pytest.fixture
def every_message_reworded(monkeypatch):
    """Each module's functions (its own and those it imports, as its code looks them up) and each built-in check's
    properties (its replay and each stage's) return their findings upper-cased."""
    for module in _modules():
        for name, value in list(vars(module).items()):
            if inspect.isfunction(value) and name not in NOT_FINDINGS:
                monkeypatch.setattr(module, name, rewording(value))
    for name in builtin_names():
        module = importlib.import_module(f"audit.checks.{name}")
        check = module.CHECK
        monkeypatch.setattr(module, "CHECK", replace(
            check, replay=check.replay and rewording(check.replay),
            model_replay=check.model_replay and rewording(check.model_replay),
            stages=tuple(replace(stage, prop=stage.prop and rewording(stage.prop)) for stage in check.stages)))


ROWS = rows()
#: Rows whose message no property returns, so the rewording cannot reach it: a raise the engine reports, a failure
#: composed by a check's ``run`` from what torch raised. Their verdict is still asserted.
UNREACHED = {
    "broken.CrashOnEmpty-empty": "the target raised: the engine says so",
    "stochastic.DropoutRaising-forward": "the target raised: the engine says so",
    "triton_kernels.BlockSizeNeverPassed-forward": "the target raised: the engine says so",
    "transforms.BranchOnData-compile": "compiling refused (fullgraph): the run's sweep says what Dynamo raised",
    "transforms.ItemInForward-compile": "compiling failed: the run's sweep says what Dynamo raised",
    "audit_transforms.no_fake-export": "tracing raised: the run says what torch.export raised",
}


@pytest.mark.parametrize("row", [pytest.param(r, marks=reachable(r.bug, r.check), id=r.id) for r in ROWS])
def test_a_reworded_message_keeps_every_verdict(every_message_reworded, tmp_path, row):
    bug = observe(entry(tmp_path, target=row.bug, **row.spec), row.check, row.dtype)
    assert bug.verdict == VIOLATED, bug.message
    said = bug.message.split("; on (", 1)[0][:60]  # the finding's own words: the engine appends the case, a note
    reached = said == said.upper()
    assert reached != (row.id in UNREACHED), f"the rewording reached this message: {reached}: {bug.message}"
    twin = observe(entry(tmp_path, target=row.twin, **row.spec), row.check, row.dtype)
    assert twin.verdict != VIOLATED, twin.message

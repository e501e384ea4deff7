"""Planted weak entries, each with a strong twin: the same correct Function registered once with a domain, dims or
claims that let named mutants survive (with the suggestion that would kill them), once without, where they are
killed. Every mutant runs in the audit's workers, as ``audit mutate`` runs it."""

from __future__ import annotations

import pytest
import yaml

from audit.checks import table
from audit.mutate.engine import mutate
from audit.mutate.results import EQUIVALENT, KILLED, SURVIVED
from audit.registry.load import load_registry
from audit.runtime.options import RunOptions

pytestmark = pytest.mark.slow  # workers: a baseline audit, then one job per mutant

M = "tests.fixtures.mutation"
ENTRIES = {
    "leaky_weak": {"target": f"{M}:Leaky", "inputs": [{"shape": ["N"], "domain": [0.1, 1]}]},
    "leaky_strong": {"target": f"{M}:Leaky", "inputs": [{"shape": ["N"], "domain": [-1, 1], "kinks": [0]}]},
    "tiled_weak": {"target": f"{M}:TiledScale", "inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}],
                   "dims": {"B": [1, 3], "N": [1, 8]}},
    "tiled_strong": {"target": f"{M}:TiledScale", "inputs": [{"shape": ["B", "N"]}, {"shape": ["N"]}],
                     "dims": {"B": [1, 3], "N": [1, 20]}},
    "cube_weak": {"target": f"{M}:Cube", "inputs": [{"shape": ["N"]}]},
    "cube_strong": {"target": f"{M}:Cube", "inputs": [{"shape": ["N"]}], "reference": f"{M}:cube_reference",
                    "supports": {"double_backward": True}},
}
#: The mutants each pair is judged by (operator globs), and the checks that judge them.
OPERATORS = ("constant 0.1 -> 1.1", "under torch.no_grad()", "constant 8 -> 9", "float32 returned value 0",
             "comparison boundary")
CHECKS = {"forward", "gradcheck", "gradgradcheck"}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mutate")
    path = folder / "registry.yaml"
    entries = [{"name": name, "owner": "@tests", **spec} for name, spec in ENTRIES.items()]
    path.write_text(yaml.safe_dump({"version": 1, "entries": entries}, sort_keys=False))
    registry = load_registry(path)
    options = RunOptions(base=str(folder), jobs=2, examples=20)
    found = mutate(registry, list(registry.entries), table(None), options, only=CHECKS, operators=OPERATORS)
    return {entry.name: entry for entry in found.entries}


def fates(entry, function: str, operator: str, diff: str = "") -> list:
    return [m for m in entry.mutants if m.function.endswith(function) and m.operator == operator and diff in m.diff]


def test_a_branch_outside_the_domain_survives_with_widen_domain_and_is_killed_on_both_signs(run):
    (weak,) = fates(run["leaky_weak"], "Leaky.backward", "constant 0.1 -> 1.1")
    assert weak.fate == SURVIVED and "widen `domain`" in weak.suggestion, weak
    assert "mirrored domain" in weak.differs and "registered" not in weak.differs
    (strong,) = fates(run["leaky_strong"], "Leaky.backward", "constant 0.1 -> 1.1")
    assert strong.fate == KILLED and strong.killed_by.startswith("gradcheck"), strong


def test_a_tile_remainder_beyond_the_dims_survives_with_widen_dims_and_is_killed_when_they_reach_it(run):
    weak = fates(run["tiled_weak"], "TiledScale.backward", "constant 8 -> 9", "range(")
    strong = fates(run["tiled_strong"], "TiledScale.backward", "constant 8 -> 9", "range(")
    survivors = [m for m in weak if m.fate == SURVIVED]
    assert survivors and all("widen `dims`" in m.suggestion for m in survivors), weak
    assert strong and all(m.fate in (KILLED, EQUIVALENT) for m in strong), strong
    assert {m.number for m in survivors} <= {m.number for m in strong if m.fate == KILLED}


def test_a_lost_second_derivative_survives_until_double_backward_is_claimed(run):
    (weak,) = fates(run["cube_weak"], "Cube.backward", "under torch.no_grad()")
    assert weak.fate == SURVIVED and "claim `supports.double_backward`" in weak.suggestion, weak
    (strong,) = fates(run["cube_strong"], "Cube.backward", "under torch.no_grad()")
    assert strong.fate == KILLED and strong.killed_by.startswith("gradgradcheck"), strong


def test_float32_arithmetic_survives_finite_differences_and_is_killed_by_a_reference(run):
    (weak,) = fates(run["cube_weak"], "Cube.backward", "float32 returned value 0")
    assert weak.fate == SURVIVED and "add a `reference`" in weak.suggestion, weak
    (strong,) = fates(run["cube_strong"], "Cube.backward", "float32 returned value 0")
    assert strong.fate == KILLED and strong.killed_by.startswith("gradcheck"), strong


def test_a_mutant_that_changes_nothing_on_any_input_is_equivalent_not_a_survivor(run):
    for name in ("leaky_weak", "leaky_strong"):
        (forward,) = fates(run[name], "Leaky.forward", "comparison boundary")  # x > 0 -> x >= 0: 0.1·0 == 0
        assert forward.fate == EQUIVALENT and forward.reason.startswith("equivalent"), forward


def test_the_kill_rate_counts_killed_over_killed_and_survived(run):
    for entry in run.values():
        counts = entry.counts
        judged = counts[KILLED] + counts["survived"]
        assert entry.kill_rate == (counts[KILLED] / judged if judged else None)
    assert run["cube_strong"].kill_rate > run["cube_weak"].kill_rate

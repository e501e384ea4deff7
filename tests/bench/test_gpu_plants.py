"""The planted CUDA registry and what it is held to agree: every plant's bug and twin are entries, the bug first;
every entry is in one plant; the checks, devices and statuses are real ones. On the CPU the Python bugs are
correct: each shows only on CUDA."""

from __future__ import annotations

import pytest

from audit.catalog.checks import CATALOG
from audit.core.contract import Status
from audit.registry.load import load_registry
from audit.results.outcome import HELD
from bench.gpu.plants import PLANTS, REGISTRY
from tests.helpers import entry, observe

ENTRIES = {e.name: e for e in load_registry(REGISTRY).entries}
ORDER = list(ENTRIES)


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_a_plant_names_its_bug_before_its_twin_with_real_checks_and_devices(plant):
    assert ORDER.index(plant.bug) < ORDER.index(plant.twin)  # the twin is the neighbour that runs after the bug
    assert set(plant.checks) <= set(CATALOG)
    for name in (plant.bug, plant.twin):
        assert set(plant.devices) <= set(ENTRIES[name].supports.devices), name
    for expected in plant.expected():
        assert expected.entry in (plant.bug, plant.twin) and expected.check in plant.checks
        assert Status(expected.status) and expected.device in plant.devices


def test_every_planted_entry_belongs_to_one_plant_and_every_bug_is_caught():
    named = [name for plant in PLANTS for name in (plant.bug, plant.twin)]
    assert sorted(named) == sorted(ENTRIES)
    for plant in PLANTS:
        assert any(e.entry == plant.bug and e.status in ("fail", "error") for e in plant.caught), plant.name


def test_a_twin_must_pass_every_check_of_its_run_on_every_device():
    plant = next(p for p in PLANTS if p.name == "cuda_kernel")
    twin = [(e.check, e.device, e.status) for e in plant.expected() if e.entry == plant.twin]
    assert twin == [("forward", "cpu", "pass"), ("forward", "cuda", "pass"), ("gradcheck", "cpu", "pass"),
                    ("gradcheck", "cuda", "pass")]


@pytest.mark.parametrize("target, check", [("NumpyTanh", "device"), ("GeluFastOnCuda", "device"),
                                           ("GeluFastOnCuda", "gradcheck")])
def test_on_the_cpu_a_planted_python_bug_holds(tmp_path, target, check):
    spec = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 8]}}
    found = observe(entry(tmp_path, target=f"bench.gpu.planted:{target}", **spec), check, examples=5)
    assert found.verdict == HELD, found.message

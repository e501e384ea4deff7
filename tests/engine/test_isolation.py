"""What one entry leaves behind (global torch state, megabytes on stdout) never changes another's verdict, in a
worker or in the distributed ranks; and an unclaimed dtype probe is compared at its own dtype's tolerance."""

from __future__ import annotations

import json
import random
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from audit.cli import cli
from audit.results.outcome import HELD
from audit.runtime.isolation import PARTS, isolated
from tests.helpers import entry, observe

G = "tests.fixtures.global_state"
ROWS = {"inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 4], "N": [1, 4]}}

#: One change per part of the state a target could leave behind.
CHANGES = {
    "grad mode": lambda: torch.set_grad_enabled(False),
    "default dtype": lambda: torch.set_default_dtype(torch.float16),
    "default device": lambda: torch.set_default_device("meta"),
    "deterministic algorithms": lambda: torch.use_deterministic_algorithms(True, warn_only=True),
    "anomaly mode": lambda: torch.autograd.set_detect_anomaly(True, check_nan=False),
    "threads": lambda: torch.set_num_threads(torch.get_num_threads() + 1),
    "float32 matmul precision": lambda: torch.set_float32_matmul_precision("medium"),
    "cudnn.deterministic": lambda: setattr(torch.backends.cudnn, "deterministic", True),
    "cudnn.benchmark": lambda: setattr(torch.backends.cudnn, "benchmark", True),
    "cudnn.allow_tf32": lambda: setattr(torch.backends.cudnn, "allow_tf32", False),
    "cuda.matmul.allow_tf32": lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", True),
}


def _state():
    return {name: read() for name, (read, _) in PARTS.items()}


@pytest.mark.parametrize("part", sorted(PARTS))
def test_isolated_puts_each_part_back(part):
    before = _state()
    with isolated():
        CHANGES[part]()
        assert _state()[part] != before[part], "the change must change something"
    assert _state() == before


def _draws() -> tuple:
    return torch.rand(3), np.random.rand(3), random.random()


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)


def test_isolated_puts_the_generators_and_warning_filters_back():
    filters = list(warnings.filters)
    _seed_all(0)
    expected = _draws()
    _seed_all(0)
    with isolated():
        _seed_all(1)
        _draws()
        warnings.simplefilter("error")
    got = _draws()
    assert torch.equal(got[0], expected[0]) and np.array_equal(got[1], expected[1]) and got[2] == expected[2]
    assert warnings.filters == filters


def test_a_cell_leaves_no_global_state_behind(tmp_path):
    """In process too (the Python API runs cells in the caller's process)."""
    polluters = [("HalfDefault", "function"), ("DeterministicOn", "function"), ("cube_logging_norm", "callable")]
    for name, kind in polluters:
        before = _state()
        observe(entry(tmp_path, target=f"{G}:{name}", kind=kind, inputs=[{"shape": ["N"]}]), "forward", examples=2)
        assert _state() == before, name


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_an_unclaimed_probe_is_compared_at_its_own_dtype_tolerance(tmp_path, dtype):
    """The float64 cell compares with the reference at float64-tight tolerance; a probe at its dtype's."""
    cube = entry(tmp_path, target="tests.fixtures.broken:Cube", reference="tests.fixtures.broken:cube_reference",
                 inputs=[{"shape": ["N"], "domain": [-3, 3]}])
    found = observe(cube, "dtype", dtype, examples=5, claimed=False)
    assert found.verdict == HELD, found.message


def _run(write_registry, tmp_path, entries, *args):
    registry = write_registry(entries, defaults={"owner": "@t", "supports": {"dtypes": ["float64"],
                                                                             "devices": ["cpu"]}})
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "-j", "1",
                                      "--progress", "off", *args], catch_exceptions=False)
    matrix = json.loads((out / "matrix.json").read_text())
    return result, {(e["name"], c["check"], c["dtype"]): c for e in matrix["entries"] for c in e["cells"]}


@pytest.mark.slow
def test_a_neighbour_in_the_same_worker_keeps_its_verdict(write_registry, tmp_path):
    """Autograd switched off, the default dtype at float16, deterministic algorithms on: the correct entries
    after them in the one worker pass; the polluter whose own gradient vanishes and a broken neighbour fail."""
    entries = [{"name": "grad_off", "kind": "callable", "target": f"{G}:cube_logging_norm", **ROWS},
               {"name": "half", "target": f"{G}:HalfDefault", **ROWS},
               {"name": "deterministic", "target": f"{G}:DeterministicOn", **ROWS},
               # float32 only: its values judged against its reference (it is never run in float64)
               {"name": "rows", "target": f"{G}:RowSums", "supports": {"dtypes": ["float32"]},
                "reference": f"{G}:row_sums_reference", **ROWS},
               {"name": "cube", "target": "tests.fixtures.broken:Cube", **ROWS},
               {"name": "wrong", "target": "tests.fixtures.broken:WrongSign", **ROWS}]
    result, cells = _run(write_registry, tmp_path, entries, "--check", "gradcheck", "--check", "dtype",
                         "--examples", "5")
    assert result.exit_code == 1
    for key in [("rows", "gradcheck", "float32"), ("rows", "dtype", "float32"), ("cube", "gradcheck", "float64"),
                ("cube", "dtype", "float64"), ("half", "gradcheck", "float64"), ("deterministic", "dtype", "float64")]:
        assert cells[key]["status"] == "pass", (key, cells[key]["message"])
    assert cells["grad_off", "gradcheck", "float64"]["status"] == "fail"
    assert cells["wrong", "gradcheck", "float64"]["status"] == "fail"


@pytest.mark.slow
def test_distributed_ranks_keep_their_state_and_their_protocol(write_registry, tmp_path):
    """The ranks serve every entry of a worker: one that leaves the default dtype at float16 and one that
    prints 20 MB a call change nothing for the next; all are correct and pass."""
    claims = {"supports": {"distributed": True}, **ROWS}
    entries = [{"name": "half", "target": f"{G}:HalfDefault", **claims},
               {"name": "chatty", "target": f"{G}:Chatty", **claims},
               {"name": "rows", "target": f"{G}:RowSums", **claims, "supports": {"distributed": True,
                                                                                "dtypes": ["float32"]}},
               {"name": "cube", "target": "tests.fixtures.broken:Cube", **claims}]
    result, cells = _run(write_registry, tmp_path, entries, "--check", "distributed", "--examples", "2")
    assert {key: cell["status"] for key, cell in cells.items()} == {
        ("half", "distributed", "float64"): "pass", ("chatty", "distributed", "float64"): "pass",
        ("rows", "distributed", "float32"): "pass", ("cube", "distributed", "float64"): "pass"}, cells
    assert result.exit_code == 0

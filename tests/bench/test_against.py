"""bench/against.py and bench/timing.py: a status that moved is named, and a benchmarked command that fails stops the
benchmark with its own words."""

from __future__ import annotations

import sys

import pytest

from bench.against import differing
from bench.timing import spent


def test_each_cell_whose_status_moved_or_that_one_side_lacks_is_named():
    this = {("cube", "gradcheck", "float64", "cpu"): "pass", ("cube", "vmap", "float64", "cpu"): "xpass"}
    other = {("cube", "gradcheck", "float64", "cpu"): "fail", ("cube", "vmap", "float64", "cpu"): "xpass",
             ("cube", "compile", "float64", "cpu"): "pass"}
    assert differing(this, other) == ["cube compile float64 cpu: pass -> None",
                                      "cube gradcheck float64 cpu: fail -> pass"]
    assert differing(this, dict(this)) == []


def test_a_failing_command_stops_the_benchmark_with_its_stderr():
    with pytest.raises(SystemExit, match=r"failed \(3\).*out of cheese"):
        spent([sys.executable, "-c", "import sys; sys.stderr.write('out of cheese'); sys.exit(3)"])
    assert spent([sys.executable, "-c", "print('ok')"]).stdout == "ok\n"

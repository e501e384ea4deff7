"""Failure messages name what is wrong, where, and by how much."""

from __future__ import annotations

import re

from audit.results.outcome import VIOLATED
from tests.helpers import entry, observe

D = "tests.fixtures.degenerate"


def test_a_nan_analytic_gradient_is_named_with_its_place_and_the_numeric_value(tmp_path):
    three = {"inputs": [{"shape": [3]}, {"shape": [3]}, {"shape": [3]}]}
    found = observe(entry(tmp_path, target=f"{D}:NanGradient", **three), "gradcheck", examples=3)
    assert found.verdict == VIOLATED
    said = re.search(r"analytic NaN at d out\[(\d)\] / d in\[2\]\[1\]; numeric (\S+) ", found.message)
    assert said, found.message
    assert abs(float(said.group(2))) <= 1.0 and "not finite" in found.message

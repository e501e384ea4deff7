"""The profile's parts (bench/costs.py): a part's time counts a call from one of its functions to another once."""

from __future__ import annotations

import cProfile
import pstats
import time

from bench.costs import part_seconds

HERE = __file__.replace("\\", "/").rsplit("/", 2)[-2:]
SUFFIX = "/".join(HERE)


def _busy(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def inner() -> None:
    _busy(0.02)


def outer() -> None:
    inner()
    _busy(0.02)


def _stats() -> pstats.Stats:
    profile = cProfile.Profile()
    profile.enable()
    outer()
    inner()  # once more, from outside the part's other function
    profile.disable()
    return pstats.Stats(profile)


def _cumulative(stats: pstats.Stats, name: str) -> float:
    return next(v[3] for k, v in stats.stats.items() if k[2] == name and k[0].endswith(SUFFIX))  # type: ignore[attr-defined]


def test_a_nested_call_within_a_part_counts_once():
    stats = _stats()
    both = part_seconds(stats, ((SUFFIX, "outer"), (SUFFIX, "inner")))
    inner_alone = part_seconds(stats, ((SUFFIX, "inner"),))
    assert abs(both - (_cumulative(stats, "outer") + 0.02)) < 0.01  # outer, and inner's own call: not outer + both
    assert abs(inner_alone - _cumulative(stats, "inner")) < 1e-6
    assert both < _cumulative(stats, "outer") + _cumulative(stats, "inner") - 0.01


def test_a_star_part_is_its_files_self_time():
    stats = _stats()
    own = sum(v[2] for k, v in stats.stats.items() if k[0].endswith(SUFFIX))  # type: ignore[attr-defined]
    assert 0 < part_seconds(stats, ((SUFFIX, "*"),)) == own < 0.06  # not the clock calls the busy loops make

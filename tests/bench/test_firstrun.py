"""A first run's wall time split into phases (bench/firstrun.py): each worker slot's phases add up to the wall time,
and each event moves the slot to the phase it begins."""

from __future__ import annotations

import pytest

from bench.firstrun import PHASES, phases, render, render_both


def _event(t: float, what: str, slot: int | None = 0, name: str = "") -> dict:
    return {"t": t, "what": what, "slot": slot, "name": name}


EVENTS = [_event(100.5, "begin", None), _event(101.0, "spawn"), _event(101.5, "assign", name="native"),
          _event(104.0, "ready"), _event(124.0, "loaded", name="native"), _event(124.5, "cell"),
          _event(130.5, "cell_end"), _event(131.0, "job_end", name="native"), _event(131.0, "assign", name="next"),
          _event(131.5, "loaded", name="next"), _event(132.0, "cell"), _event(134.0, "cell_end"),
          _event(134.5, "job_end", name="next"), _event(140.0, "workers_done", None), _event(140.5, "written", None)]


def test_each_phase_is_the_time_from_the_event_that_begins_it_and_they_add_up_to_the_wall():
    found = phases(EVENTS, start=100.0, end=141.0)[0]
    assert found == pytest.approx({
        "before the engine": 0.5, "worker start": 3.5,  # the parent planning (0.5), then the import until ready
        "waiting for work": 0.0, "loading targets": 20.5, "cells": 8.0, "between cells": 2.0,
        "idle at the end": 5.5, "after the workers": 1.0})
    assert sum(found.values()) == pytest.approx(41.0) and list(found) == list(PHASES)


def test_a_replaced_worker_starts_again_and_the_table_names_the_target():
    events = EVENTS[:6] + [_event(126.0, "spawn"), _event(129.0, "ready"), _event(129.5, "assign", name="rest"),
                           _event(130.0, "job_end", name="rest"), _event(140.0, "workers_done", None)]
    found = phases(events, start=100.0, end=141.0)[0]
    assert found["worker start"] == pytest.approx(3.5 + 3.0) and found["cells"] == pytest.approx(1.5)
    text = "\n".join(render({"rev": "abc", "wall": 41.0, "cells": 40.0, "second": {"wall": 30.0, "cells": 39.0},
                             "phases": {0: found}}))
    assert "target ≤ 1.5x that, 30.0 s: **2.05x**" in text and "| worker start | 6.5 |" in text


def test_before_and_after_are_set_side_by_side_with_each_ones_phases():
    def side(rev: str, wall: float, cells: float) -> dict:
        return {"rev": rev, "wall": wall, "cells": cells, "second": {"wall": 30.0, "cells": 40.0},
                "phases": phases(EVENTS, start=100.0, end=141.0)}

    text = "\n".join(render_both({"before": side("aaa1111", 60.0, 40.0), "after": side("bbb2222", 30.0, 40.0)}))
    assert "| first run, wall (s) | **60.0** | **30.0** |" in text
    assert "| wall over (cells' work / 2) (target ≤ 1.5) | **3.00** | **1.50** |" in text
    assert "| first run's wall over (second run's cells' work / 2) | 3.00 | 1.50 |" in text
    assert text.count("| loading targets | 20.5 |") == 2  # each side's phase table

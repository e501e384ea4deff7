"""A cache record that is not what the audit wrote is discarded and recomputed, never a traceback."""

from __future__ import annotations

import json

import pytest

from audit.engine.cache import Cache
from audit.results.outcome import HELD, CellKey, Outcome

KEY = "ab" + "c" * 62
GOOD = Outcome(CellKey("gradcheck", "float64", "cpu"), HELD, "", 20, 0.5)


def test_a_stored_record_is_read_back(tmp_path):
    cache = Cache(tmp_path, 1 << 20)
    cache.put(KEY, GOOD, "digest")
    assert cache.get(KEY) == (GOOD, "digest")


@pytest.mark.parametrize("text", ["[]", "null", "3", '{"outcome": [], "digest": "d"}', '{"digest": "d"}',
                                  '{"outcome": {"check": "gradcheck"}, "digest": "d"}', "{not json",
                                  "wrong verdict", "digest not a string", "examples a string"])
def test_a_foreign_record_is_discarded(tmp_path, text):
    cache = Cache(tmp_path, 1 << 20)
    cache.put(KEY, GOOD, "digest")
    path = next(tmp_path.rglob("*.json"))
    record = json.loads(path.read_text())
    if text == "wrong verdict":
        record["outcome"]["verdict"] = "maybe"
    elif text == "digest not a string":
        record["digest"] = 7
    elif text == "examples a string":
        record["outcome"]["examples"] = "20"
    path.write_text(json.dumps(record) if text[0].isalpha() and " " in text else text)
    assert cache.get(KEY) is None
    assert not path.exists() and cache.misses == 1

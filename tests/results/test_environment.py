"""The environment a run audits on is one typed record: a worker's report, the cache's store, the matrix's
fingerprint and a diff's comparison all read the same fields."""

from __future__ import annotations

import json

import pytest

from audit.engine import environment as store
from audit.results.changes import ENVIRONMENT_KEYS
from audit.results.environment import FIELDS, Environment

GPU = Environment(torch="2.13.0+cu124", python="3.11.7", cuda="12.4", devices=("cpu", "cuda"), platform="Linux")


def test_an_environment_round_trips_through_json():
    assert Environment.from_json(json.loads(json.dumps(GPU.to_json()))) == GPU
    assert GPU.to_json()["devices"] == ["cpu", "cuda"]


@pytest.mark.parametrize("data", [None, [], {"torch": "2"}, {**GPU.to_json(), "extra": 1},
                                  {**GPU.to_json(), "devices": "cpu"}, {**GPU.to_json(), "torch": 2}])
def test_what_is_not_an_environment_is_refused(data):
    with pytest.raises(ValueError, match="not an environment"):
        Environment.from_json(data)


def test_an_unknown_environment_has_the_cpu_alone():
    assert Environment().to_json() == {"torch": None, "python": None, "cuda": None, "devices": ["cpu"],
                                       "platform": None}


def test_the_store_gives_back_what_it_holds_while_the_fingerprint_matches(tmp_path):
    (tmp_path / store.STORE).write_text(json.dumps({"fingerprint": store.fingerprint(), "environment": GPU.to_json()}))
    assert store.known(tmp_path) == GPU


@pytest.mark.parametrize("text", ["[]", "{}", '{"fingerprint": {}, "environment": {"torch": "2"}}', "not json"])
def test_a_store_this_audit_did_not_write_is_ignored(tmp_path, text):
    (tmp_path / store.STORE).write_text(text)
    assert store._read(tmp_path / store.STORE) is None


def test_a_diff_compares_every_field_of_the_environment_and_the_settings_that_change_verdicts():
    assert ENVIRONMENT_KEYS[:len(FIELDS)] == FIELDS == ("torch", "python", "cuda", "devices", "platform")
    assert set(ENVIRONMENT_KEYS[len(FIELDS):]) == {"examples", "compile_backend", "seed"}

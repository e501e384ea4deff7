"""Native sources built ahead of the workers (audit/engine/prebuild.py), under a lock a killed build cannot leave
held (audit/runtime/native.py), and the run's timeline that shows where the wall time went
(audit/engine/timeline.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import deque

import pytest

from audit.engine import prebuild, timeline
from audit.engine.job import Job
from audit.engine.parts import split, take
from audit.results.outcome import CellKey
from audit.runtime import native
from audit.runtime.options import RunOptions
from tests.conftest import ROOT
from tests.helpers import entry, run_native

PLANTED = "tests/fixtures/csrc/planted.cpp"


def _job(tmp_path, name: str, load: list[str]) -> Job:
    cells = (CellKey("forward", "float64", "cpu"),)
    found = entry(tmp_path, name=name, kind="op", target=f"audit_planted::{name}", load=load,
                  inputs=[{"shape": [3]}])
    return Job(found, cells, dict.fromkeys(cells, True), RunOptions())


class _Builder:
    """A stand-in for a builder process: running until told otherwise."""

    def __init__(self, command, **kwargs) -> None:
        self.command, self.kwargs, self.code = command, kwargs, None

    def poll(self):
        return self.code


def test_each_source_set_gets_one_builder_and_its_entries_wait_while_it_runs(tmp_path, monkeypatch):
    jobs = [_job(tmp_path, "a", [PLANTED]), _job(tmp_path, "b", ["examples.library_op"]),
            _job(tmp_path, "c", [PLANTED]), _job(tmp_path, "d", []),
            _job(tmp_path, "e", ["examples.library_op", "tests/fixtures/csrc/broken.cpp"])]
    monkeypatch.setattr(prebuild.subprocess, "Popen", _Builder)
    builders = prebuild.Builders(jobs, "/base", {"X": "1"})
    started = list(builders.running.values())
    assert [b.command[3:] for b in started] == [["/base", PLANTED], ["/base", "tests/fixtures/csrc/broken.cpp"]]
    assert all(b.command[1:3] == ["-m", "audit.engine.prebuild"] and b.kwargs["env"] == {"X": "1"}
               and b.kwargs["start_new_session"] for b in started)
    pending = deque(split(jobs, frozenset()))
    assert take(pending, True, builders.building).job.entry.name == "b"  # a is still building
    started[0].code = 0  # a's sources are built
    assert [take(pending, True, builders.building).job.entry.name for _ in range(2)] == ["a", "c"]
    # nothing but an entry still building is left: it is taken (its worker waits for the build)
    assert [take(pending, True, builders.building).job.entry.name for _ in range(2)] == ["d", "e"]
    assert take(pending, True, builders.building) is None


def test_a_lock_file_a_killed_build_left_is_removed_once_the_kernel_lock_is_held(tmp_path):
    (tmp_path / "lock").write_text("")  # torch's FileBaton: every later build would wait on it forever
    with native._exclusive(tmp_path):
        assert not (tmp_path / "lock").exists()


def test_the_build_lock_is_held_by_one_process_at_a_time_and_freed_when_it_dies(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from pathlib import Path; from audit.runtime import native\n"
        f"with native._exclusive(Path({str(tmp_path)!r})):\n"
        "    print('held', flush=True); time.sleep(60)")], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        import fcntl

        with open(tmp_path / "audit.lock") as lock, pytest.raises(BlockingIOError):
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        holder.kill()
        holder.wait()
    with native._exclusive(tmp_path):  # the kernel freed it with its holder
        pass


def test_the_timeline_is_written_only_where_asked(tmp_path, monkeypatch):
    path = tmp_path / "timeline.jsonl"
    monkeypatch.delenv(timeline.VARIABLE, raising=False)
    timeline.stamp("begin")
    assert not path.exists()
    monkeypatch.setenv(timeline.VARIABLE, str(path))
    timeline.stamp("assign", 1, "softplus")
    event = json.loads(path.read_text())
    assert (event["what"], event["slot"], event["name"]) == ("assign", 1, "softplus") and event["t"] > 0
    monkeypatch.setenv(timeline.VARIABLE, str(tmp_path / "no" / "such" / "folder.jsonl"))
    timeline.stamp("begin")  # a profile never fails the run it profiles


@pytest.mark.slow  # builds the planted extension (about 20 s) in a fresh build folder
def test_a_native_entry_is_built_beside_the_workers_while_they_audit_the_rest(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("AUDIT_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv(timeline.VARIABLE, str(tmp_path / "timeline.jsonl"))
    entries = [
        {"name": "square", "kind": "op", "target": "audit_planted::square", "load": [PLANTED],
         "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
        {"name": "cube", "target": "tests.fixtures.broken:Cube", "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
    ]
    result, cells = run_native(tmp_path, "prebuild", entries)
    assert cells["square", "forward"]["status"] == "pass" and cells["square", "gradcheck"]["status"] == "pass", \
        result.output
    events = [json.loads(line) for line in (tmp_path / "timeline.jsonl").read_text().splitlines()]
    assert [e["name"] for e in events if e["what"] == "assign"] == ["cube", "square"]
    assert events[0]["what"] == "begin" and events[-1]["what"] == "written"
    assert {"spawn", "ready", "loaded", "cell", "cell_end", "job_end", "workers_done"} <= {e["what"] for e in events}
    folder = next((tmp_path / "build").iterdir())
    assert (folder / "build.log").read_text().startswith("built ") and not (folder / "lock").exists()

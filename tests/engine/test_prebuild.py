"""Native sources built ahead of the workers (audit/engine/prebuild.py), under a lock a killed build cannot leave
held (audit/runtime/native.py), and the run's timeline that shows where the wall time went
(audit/engine/timeline.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from audit.cli import cli
from audit.engine import prebuild, timeline
from audit.engine.job import Job
from audit.engine.parts import split
from audit.results.outcome import CellKey
from audit.runtime import native
from audit.runtime.options import RunOptions
from tests.conftest import ROOT
from tests.helpers import entry

PLANTED = "tests/fixtures/csrc/planted.cpp"


def _job(tmp_path, name: str, load: list[str]) -> Job:
    cells = (CellKey("forward", "float64", "cpu"),)
    found = entry(tmp_path, name=name, kind="op", target=f"audit_planted::{name}", load=load,
                  inputs=[{"shape": [3]}])
    return Job(found, cells, dict.fromkeys(cells, True), RunOptions())


def test_entries_that_build_go_last_in_order_and_each_source_set_gets_one_builder(tmp_path, monkeypatch):
    jobs = [_job(tmp_path, "a", [PLANTED]), _job(tmp_path, "b", ["examples.library_op"]),
            _job(tmp_path, "c", [PLANTED]), _job(tmp_path, "d", []),
            _job(tmp_path, "e", ["examples.library_op", "tests/fixtures/csrc/broken.cpp"])]
    assert [p.job.entry.name for p in prebuild.last(split(jobs, frozenset()))] == ["b", "d", "a", "c", "e"]
    started = []
    monkeypatch.setattr(prebuild.subprocess, "Popen", lambda command, **kwargs: started.append((command, kwargs)))
    prebuild.start(jobs, "/base", {"X": "1"})
    assert [command[3:] for command, _ in started] == [["/base", PLANTED], ["/base", "tests/fixtures/csrc/broken.cpp"]]
    assert all(command[1:3] == ["-m", "audit.engine.prebuild"] and kwargs["env"] == {"X": "1"}
               and kwargs["start_new_session"] for command, kwargs in started)


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
def test_a_native_entry_is_built_beside_the_workers_and_audited_after_the_rest(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("AUDIT_BUILD_DIR", str(tmp_path / "build"))
    monkeypatch.setenv(timeline.VARIABLE, str(tmp_path / "timeline.jsonl"))
    entries = [
        {"name": "square", "kind": "op", "target": "audit_planted::square", "load": [PLANTED],
         "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
        {"name": "cube", "target": "tests.fixtures.broken:Cube", "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
    ]
    registry = ROOT / f"prebuild_{tmp_path.name}.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@native", "supports": {
        "dtypes": ["float64"], "devices": ["cpu"]}}, "entries": entries}, sort_keys=False))
    try:
        result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(tmp_path / "out"),
                                          "--check", "forward", "--check", "gradcheck", "--progress", "off"])
    finally:
        registry.unlink()
    cells = {(e["name"], c["check"]): c["status"]
             for e in json.loads((tmp_path / "out" / "matrix.json").read_text())["entries"] for c in e["cells"]}
    assert cells[("square", "forward")] == "pass" and cells[("square", "gradcheck")] == "pass", result.output
    events = [json.loads(line) for line in (tmp_path / "timeline.jsonl").read_text().splitlines()]
    assert [e["name"] for e in events if e["what"] == "assign"] == ["cube", "square"]
    assert events[0]["what"] == "begin" and events[-1]["what"] == "written"
    assert {"spawn", "ready", "loaded", "cell", "cell_end", "job_end", "workers_done"} <= {e["what"] for e in events}
    folder = next((tmp_path / "build").iterdir())
    assert (folder / "build.log").read_text().startswith("built ") and not (folder / "lock").exists()

"""The stages' own logic on the CPU: reading pytest's report, the commands they run (this Python, this checkout,
nothing installed or fetched), stopping a command at its time, and the whole script on a machine without CUDA
or jsonschema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import torch
import yaml

from bench.gpu import junit, processes, stages
from bench.gpu.deadline import Deadline
from bench.gpu.plants import PLANTS, REGISTRY, Expected, Plant
from bench.gpu.processes import Command, Finished
from bench.gpu.results import Status
from tests.helpers import ROOT

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="1" skipped="1" tests="5">
<testcase classname="tests.gpu.test_a" name="test_ok" time="0.1"/>
<testcase classname="tests.gpu.test_a" name="test_ok_too" time="0.1"/>
<testcase classname="tests.gpu.test_a" name="test_wrong" time="0.1">
<failure message="AssertionError: 1 != 2&#10;more">trace</failure></testcase>
<testcase classname="tests.gpu.test_b" name="test_broken" time="0.1">
<error message="fixture failed">trace</error></testcase>
<testcase classname="tests.gpu.test_b" name="test_nvcc" time="0.0">
<skipped message="no nvcc here"/></testcase>
</testsuite></testsuites>
"""


def context(tmp_path, **more) -> stages.Context:
    return stages.Context(root=ROOT, out=tmp_path, python=sys.executable, env=dict(os.environ),
                          deadline=Deadline(time.monotonic(), 480.0), **more)


def test_the_pytest_report_gives_counts_failures_by_name_and_skip_reasons(tmp_path):
    (tmp_path / "junit.xml").write_text(REPORT)
    found = junit.read(tmp_path / "junit.xml")
    assert found.counts() == (("passed", 2), ("failed", 2), ("skipped", 1))
    assert found.failures == ("tests.gpu.test_a::test_wrong: AssertionError: 1 != 2",
                              "tests.gpu.test_b::test_broken: fixture failed")
    assert found.skips == ("tests.gpu.test_b::test_nvcc: no nvcc here",)


def fake_pytest(monkeypatch, report: str | None, returncode: int | None):
    """processes.run standing in for pytest: it writes ``report`` where --junitxml says, and ends with
    ``returncode`` (None: stopped at its time)."""
    ran = []

    def run(command, timeout, *, cwd, env):
        ran.append(command)
        xml = next(a.split("=", 1)[1] for a in command.argv if a.startswith("--junitxml="))
        command.log.parent.mkdir(parents=True, exist_ok=True)
        command.log.write_text("collected 5 items\n")
        if report is not None:
            with open(xml, "w") as out:
                out.write(report)
        return Finished(returncode, 1.0)

    monkeypatch.setattr(processes, "run", run)
    return ran


def test_the_pytest_stage_fails_on_a_failed_test_and_lists_it(tmp_path, monkeypatch):
    ran = fake_pytest(monkeypatch, REPORT, 1)
    result = stages.pytest_gpu(context(tmp_path), 100)
    assert result.status == Status.FAIL and result.detail == "2 passed, 2 failed, 1 skipped"
    assert result.problems[0] == "tests.gpu.test_a::test_wrong: AssertionError: 1 != 2"
    assert result.notes == ("tests.gpu.test_b::test_nvcc: no nvcc here",) and "collected 5 items" in result.tail
    assert ran[0].argv[1:] == ("-m", "pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "-rs",
                               f"--junitxml={tmp_path}/stages/pytest/junit.xml", "tests")


def test_the_pytest_stage_passes_only_when_a_gpu_test_ran(tmp_path, monkeypatch):
    passing = REPORT.replace('<failure message="AssertionError: 1 != 2&#10;more">trace</failure>', "").replace(
        '<error message="fixture failed">trace</error>', "")
    fake_pytest(monkeypatch, passing, 0)
    assert stages.pytest_gpu(context(tmp_path), 100).status == Status.PASS
    skipped = REPORT.split("<testcase")[0] + '<testcase classname="a" name="t"><skipped message="m"/></testcase>' \
        "</testsuite></testsuites>"
    fake_pytest(monkeypatch, skipped, 0)
    result = stages.pytest_gpu(context(tmp_path), 100)
    assert result.status == Status.FAIL and result.detail.endswith("no test marked gpu passed")


def test_the_pytest_stage_stopped_at_its_time_or_without_a_report(tmp_path, monkeypatch):
    fake_pytest(monkeypatch, None, None)
    assert stages.pytest_gpu(context(tmp_path), 100).status == Status.TIMED_OUT
    fake_pytest(monkeypatch, None, 4)
    result = stages.pytest_gpu(context(tmp_path), 100)
    assert result.status == Status.ERROR and result.detail.startswith("pytest exited 4 without a report")


def test_the_commands_are_this_python_on_this_checkout_with_nothing_installed(tmp_path, monkeypatch):
    """No pip, no network, no console script: ``python -m`` with the checkout first on PYTHONPATH."""
    seen = []
    monkeypatch.setattr(processes, "run", lambda command, timeout, **kw: seen.append(command) or Finished(None, 1.0))
    monkeypatch.setattr(processes, "run_all",
                        lambda commands, timeout, **kw: seen.extend(commands) or [Finished(None, 1.0)] * len(commands))
    ctx = context(tmp_path)
    stages.environment(ctx, 10)
    for stage in stages.STAGES:
        stage.run(ctx, 10)
    modules = {command.argv[2] for command in seen}
    assert modules == {"bench.gpu.facts", "audit", "pytest"}
    assert all(command.argv[:2] == (sys.executable, "-m") for command in seen)
    assert not any("pip" in arg or "http" in arg for command in seen for arg in command.argv)
    env = stages.child_env(ROOT, {"PYTHONPATH": "/elsewhere", "TRITON_INTERPRET": "1", "HOME": "/h"})
    assert env["PYTHONPATH"] == f"{ROOT}{os.pathsep}/elsewhere" and "TRITON_INTERPRET" not in env
    assert env["HOME"] == "/h" and env["PYTHONUNBUFFERED"] == "1"


def test_a_plants_run_selects_its_bug_then_its_twin_in_one_worker(tmp_path):
    plant = next(p for p in PLANTS if p.name == "inductor")
    argv = stages.planted_argv(context(tmp_path), plant, tmp_path / "inductor")
    assert argv[3:6] == ("run", "--registry", str(REGISTRY))
    assert " ".join(argv[6:]).startswith("--select cube_item_in_forward --select cube --check compile --device cuda "
                                         "-j 1 --examples 10")
    assert argv[-2:] == ("--compile-backend", "inductor")


def sleeper(tmp_path, name: str, seconds: float) -> Command:
    return Command((sys.executable, "-c", f"import time; print('{name}', flush=True); time.sleep({seconds})"),
                   tmp_path / f"{name}.log")


def test_a_command_past_its_time_is_stopped_and_one_never_started_says_so(tmp_path):
    began = time.monotonic()
    ended = processes.run_all([sleeper(tmp_path, "quick", 0), sleeper(tmp_path, "slow", 60),
                               sleeper(tmp_path, "last", 0)], 3.0, parallel=2, cwd=ROOT, env=dict(os.environ))
    assert time.monotonic() - began < 20
    quick, slow, last = ended
    assert quick.returncode == 0 and not quick.timed_out
    assert slow.timed_out and slow.seconds >= 2.5
    assert last.returncode == 0  # started when the quick one ended
    assert processes.tail(tmp_path / "slow.log") == "slow"
    never = processes.run_all([sleeper(tmp_path, "a", 60), sleeper(tmp_path, "b", 0)], 1.0, parallel=1, cwd=ROOT,
                              env=dict(os.environ))
    assert never[0].timed_out and not never[1].started and not never[1].timed_out


def test_without_cuda_or_jsonschema_the_script_writes_its_summary_and_fails(tmp_path):
    """jsonschema made unimportable for the script and every command it runs; no GPU: the environment stage
    validates both registries without it, the CUDA stages are skips saying why, the summary is written."""
    blocked = tmp_path / "blocked" / "jsonschema"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('jsonschema is blocked for this test')\n")
    if torch.cuda.is_available():
        pytest.skip("CUDA is present: the stages would run")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(blocked.parent)])}
    done = subprocess.run([sys.executable, "-m", "bench.gpu_acceptance", "--out", str(tmp_path / "out")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    document = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert document["facts"]["jsonschema"] is False and document["facts"]["audit"] == str(ROOT / "audit")
    assert document["facts"]["packages"]["hypothesis"] and document["facts"]["torch"]
    assert [(s["name"], s["status"]) for s in document["stages"]] == [
        ("environment", "pass"), ("pytest", "skip"), ("registry", "skip"), ("planted", "skip")]
    assert "no CUDA device here" in document["stages"][1]["detail"]
    assert (tmp_path / "out" / "summary.md").read_text().startswith("# GPU acceptance: FAIL")
    assert "GPU acceptance: FAIL" in done.stdout


def test_an_unknown_stage_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "bench.gpu_acceptance", "--out", "x", "--stage", "gpu"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "invalid choice: 'gpu'" in done.stderr


@pytest.mark.slow
def test_the_planted_stage_holds_each_plants_real_run_to_its_expectations(tmp_path, monkeypatch):
    """Two CPU plants, audited for real: one as expected, one whose expectation is wrong on purpose."""
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@t", "supports": {
        "dtypes": ["float64"], "devices": ["cpu"]}}, "entries": [
        {"name": name, "target": f"tests.fixtures.broken:{target}", "inputs": [{"shape": ["N"]}]}
        for name, target in (("wrong_sign", "WrongSign"), ("cube", "Cube"))]}))
    caught = Plant("caught", "a wrong sign", "wrong_sign", "cube", ("gradcheck",),
                   (Expected("wrong_sign", "gradcheck", "fail", "cpu"),), devices=("cpu",))
    missed = Plant("missed", "the same, expected to pass", "wrong_sign", "cube", ("gradcheck",),
                   (Expected("wrong_sign", "gradcheck", "pass", "cpu"),), devices=("cpu",))
    monkeypatch.setattr(stages, "PLANTS", (caught, missed))
    monkeypatch.setattr(stages, "PLANTED", registry)
    result = stages.planted(context(tmp_path / "run", jobs=2), 300)
    assert result.status == Status.FAIL and result.detail == "1 of 2 plants as expected", result.problems
    assert len(result.problems) == 1
    assert result.problems[0].startswith("missed: wrong_sign gradcheck (cpu): expected pass, got fail: ")

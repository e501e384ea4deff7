"""No entry can hurt another: an entry's cells are the same whatever ran before it in its worker.

Each damaging target (tests/fixtures/damage.py: a backward that recurses without end, a memory hoard, a thread
hoard, an address-space hoard, a KeyboardInterrupt, a fork that returns) is followed by correct neighbours of
three kinds: plain Python, a scipy-backed callable (loading it maps scipy's libraries) and a C++ operator
loaded with ``load:``. The registry runs in two orders, at ``-j 1`` and ``-j 2``, and every neighbour's cells
must equal its solo run: the same entry alone in a fresh worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the damage is Linux's (RLIMIT_AS)")]

D = "tests.fixtures.damage"
HOSTILE = ["Runaway", "Hoarder", "ThreadHog", "AddressHog", "Interrupter", "ForkReturner"]
KINDS = {
    "py": {"target": "tests.fixtures.broken:Cube"},
    "scipy": {"target": "tests.fixtures.scipy_expit:Expit"},
    "cpp": {"kind": "op", "target": "audit_planted::square", "load": [str(ROOT / "tests/fixtures/csrc/planted.cpp")]},
}
DEFAULTS = {"owner": "@t", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}}
#: A cap low enough that the hoards reach it in a moment; ample for every neighbour.
RUN = ["--check", "forward", "--check", "gradcheck", "--max-memory", "2G", "--timeout", "60", "--no-cache",
       "--progress", "off", "--examples", "10"]


def _entry(name: str, spec: dict) -> dict:
    return {"name": name, "inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}, **spec}


def _neighbours(hostile: str, kinds: list[str]) -> list[dict]:
    return [_entry(f"{kind}_after_{hostile.lower()}", KINDS[kind]) for kind in kinds]


def _registry(path: Path, entries: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"version": 1, "defaults": DEFAULTS, "entries": entries}, sort_keys=False))
    return path


def _run(registry: Path, out: Path, *args: str) -> dict:
    env = {**os.environ, "AUDIT_BUILD_DIR": str(ROOT / ".audit-cache" / "build")}  # one build for every registry
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out", str(out),
                           *RUN, *args], cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    matrix = json.loads((out / "matrix.json").read_text())
    return {e["name"]: [(c["check"], c["status"], c["message"], c.get("examples")) for c in e["cells"]]
            for e in matrix["entries"]}


def _orders() -> dict[str, list[dict]]:
    kinds = list(KINDS)
    first = [e for h in HOSTILE for e in [_entry(h.lower(), {"target": f"{D}:{h}"})] + _neighbours(h, kinds)]
    # The other way round: the hostile targets in reverse, each followed by the neighbour kinds in reverse.
    second = [e for h in reversed(HOSTILE)
              for e in [_entry(h.lower(), {"target": f"{D}:{h}"})] + _neighbours(h, kinds[::-1])]
    return {"forward": first, "reversed": second}


def test_a_neighbours_cells_do_not_depend_on_what_ran_before_it(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    orders = _orders()
    neighbours = [e for e in orders["forward"] if "_after_" in e["name"]]
    # Solo: one worker per entry (-j as many as entries), so each neighbour runs alone in a fresh process.
    solo = _run(_registry(tmp_path / "solo.yaml", neighbours), tmp_path / "solo", "-j", str(len(neighbours)))
    assert all(status == "pass" for cells in solo.values() for _, status, _, _ in cells), solo
    for order, entries in orders.items():
        registry = _registry(tmp_path / f"{order}.yaml", entries)
        for jobs in ("1", "2"):
            cells = _run(registry, tmp_path / f"{order}-{jobs}", "-j", jobs)
            changed = {name: (cells[name], solo[name]) for name in solo if cells[name] != solo[name]}
            assert not changed, f"{order} order, -j {jobs}: {changed}"
            for hostile in HOSTILE:  # each damaging target is contained: an error of its own (Runaway's forward holds)
                assert "error" in {status for _, status, _, _ in cells[hostile.lower()]}, cells[hostile.lower()]


def _marked(marker: bytes) -> list[int]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue
    return found


def test_a_daemon_in_a_session_of_its_own_ends_with_its_cell(write_registry, tmp_path):
    """A double-forked daemon that called setsid has left the worker's group and its parent: the worker, a child
    subreaper, still finds it in its tree and ends it; nothing the run started is left 5 s after it ends."""
    registry = write_registry([_entry("daemon", {"target": f"{D}:Daemonizer"})], defaults=DEFAULTS)
    before = set(_marked(b"audit-daemon-marker"))
    cells = _run(registry, tmp_path / "out", "-j", "1")
    assert [status for _, status, _, _ in cells["daemon"]] == ["pass", "pass"], cells
    deadline = time.monotonic() + 5
    while set(_marked(b"audit-daemon-marker")) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    left = set(_marked(b"audit-daemon-marker")) - before
    for pid in left:  # leave nothing behind, even when the test fails
        os.kill(pid, 9)
    assert not left


def test_a_target_that_prints_megabytes_per_call_passes_at_normal_speed(write_registry, tmp_path):
    """32 MB to stdout and 32 MB to stderr on every call: only the end of each write reaches the worker's log, so
    the checks run at the target's own speed (measured: gradcheck 12.8 s; 61.6 s when every byte went to the log,
    which this budget does not allow)."""
    chatty = {**_entry("chatty", {"target": f"{D}:Chatty"}), "dims": {"N": [1, 16]}}
    registry = write_registry([chatty], defaults=DEFAULTS)
    cells = _run(registry, tmp_path / "out", "-j", "1", "--timeout", "40", "--examples", "20")
    assert [status for _, status, _, _ in cells["chatty"]] == ["pass", "pass"], cells


def test_an_entry_that_damages_every_cell_costs_at_most_three_fresh_workers(write_registry, tmp_path):
    """Each damaged cell retires its worker; after three, the entry's remaining cells are errors without a
    worker start-up each (as after three crashes)."""
    registry = write_registry([_entry("interrupter", {"target": f"{D}:Interrupter"})], defaults=DEFAULTS)
    cells = _run(registry, tmp_path / "out", "-j", "1", "--check", "undefined_grad", "--check", "determinism")
    messages = [message for _, _, message, _ in cells["interrupter"]]
    assert all(m.startswith("the target raised KeyboardInterrupt (at ") for m in messages[:3]), messages
    assert messages[3].startswith("not run: this entry lost its worker 3 times"), messages


def test_the_checkup_between_entries_retires_a_worker_that_grew_past_a_bound(write_registry, tmp_path):
    """A correct target that leaves 100 threads behind passes its own cells; the checkup after it finds the
    threads and retires the worker, so the next entry starts in a fresh process (AUDIT_HEALTH_LOG shows it)."""
    log = tmp_path / "health.jsonl"
    registry = write_registry([_entry("leaker", {"target": f"{D}:ThreadLeaker"}), _entry("after", KINDS["py"])],
                              defaults=DEFAULTS)
    os.environ["AUDIT_HEALTH_LOG"] = str(log)
    try:
        cells = _run(registry, tmp_path / "out", "-j", "1")
    finally:
        del os.environ["AUDIT_HEALTH_LOG"]
    assert [s for _, s, _, _ in cells["leaker"]] == ["pass", "pass"] == [s for _, s, _, _ in cells["after"]]
    checkups = [json.loads(line) for line in log.read_text().splitlines()]
    assert [c["after"] for c in checkups] == ["leaker", "after"]
    assert checkups[0]["retire"].startswith("its threads grew by 10") and checkups[0]["grown_threads"] >= 100
    assert checkups[1]["retire"] == "" and checkups[1]["grown_threads"] < 5  # the fresh worker has none of them


def test_an_entry_that_crashes_every_cell_gets_the_same_cells_at_any_j(write_registry, tmp_path):
    """A segfault in every cell: after three lost workers the entry's other cells are not run, and the pinned check
    (distributed, with its rank pool) counts its own losses. With two workers it runs as a part of its own, so with
    one it must too: its cell says the worker crashed in it at -j 1 as at -j 2, never "not run" at one of them."""
    crasher = _entry("crasher", {"target": "tests.fixtures.hostile:Segfault"})
    registry = write_registry([crasher, _entry("py_beside", KINDS["py"])], defaults=DEFAULTS)  # two: -j 2 splits
    checks = [arg for name in ("gradgradcheck", "undefined_grad", "distributed") for arg in ("--check", name)]
    runs = {j: _run(registry, tmp_path / f"j{j}", "-j", j, *checks) for j in ("1", "2")}
    assert runs["1"] == runs["2"], runs
    messages = {check: message for check, _, message, _ in runs["1"]["crasher"]}
    assert all("killed by SIGSEGV during" in messages[check] for check in ("forward", "gradcheck", "gradgradcheck"))
    assert messages["undefined_grad"].startswith("not run: this entry lost its worker 3 times"), messages
    assert "killed by SIGSEGV during distributed" in messages["distributed"], messages

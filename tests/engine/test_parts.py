"""An entry's job in parts (audit/engine/parts.py): the distributed cells go to the one worker that holds the
ranks, the rest to any worker, and the listener still hears one begin and one end per entry."""

from __future__ import annotations

from collections import deque

from audit.engine.job import Finished, Job
from audit.engine.parts import Part, Wholes, split, take
from audit.results.outcome import HELD, CellKey, Outcome
from audit.runtime.options import RunOptions
from tests.helpers import entry

PINNED = frozenset({"distributed"})


def _job(tmp_path, name: str, checks: list[str]) -> Job:
    cells = tuple(CellKey(check, "float64", "cpu") for check in checks)
    found = entry(tmp_path, name=name, target="tests.fixtures.broken:Cube", inputs=[{"shape": [3]}])
    return Job(found, cells, dict.fromkeys(cells, True), RunOptions())


def test_split_puts_each_entrys_pinned_cells_in_a_part_of_their_own_after_the_rest(tmp_path):
    a = _job(tmp_path, "a", ["forward", "distributed", "gradcheck"])
    b = _job(tmp_path, "b", ["forward"])
    c = _job(tmp_path, "c", ["distributed"])
    parts = split([a, b, c], PINNED)
    assert [(p.job.entry.name, [k.check for k in p.job.cells], p.pinned) for p in parts] == [
        ("a", ["forward", "gradcheck"], False), ("a", ["distributed"], True), ("b", ["forward"], False),
        ("c", ["distributed"], True)]
    assert all(p.job.claimed == a.claimed for p in parts[:2])  # the whole job's claims travel with each part


def test_without_pinned_checks_each_job_is_one_part(tmp_path):
    a = _job(tmp_path, "a", ["forward", "distributed"])
    assert split([a], frozenset()) == [Part(a)]


def test_only_the_holder_takes_a_pinned_part(tmp_path):
    a = _job(tmp_path, "a", ["forward", "distributed"])
    b = _job(tmp_path, "b", ["forward"])
    pending = deque(split([a, b], PINNED))
    first = take(pending, holder=False)
    assert (first.job.entry.name, first.pinned) == ("a", False)
    second = take(pending, holder=False)  # skips a's pinned part
    assert (second.job.entry.name, second.pinned) == ("b", False)
    assert take(pending, holder=False) is None  # only a pinned part is left: not for this worker
    assert take(pending, holder=True).pinned and not pending


class _Heard:
    def __init__(self):
        self.events = []

    def begin(self, job):
        self.events.append(("begin", job.entry.name, len(job.cells)))

    def outcome(self, job, outcome):
        self.events.append(("outcome", job.entry.name, len(job.cells), outcome.key.check))

    def end(self, job, finished):
        self.events.append(("end", job.entry.name, len(job.cells), finished))


def test_the_listener_hears_whole_jobs_one_begin_and_one_end_each(tmp_path):
    a = _job(tmp_path, "a", ["forward", "distributed"])
    parts = split([a], PINNED)
    heard = _Heard()
    wholes = Wholes([a], parts, heard)
    rest, own = parts
    wholes.begin(rest.job)
    wholes.begin(own.job)
    wholes.outcome(own.job, Outcome(own.job.cells[0], HELD))
    wholes.end(own.job, Finished(None, "target could not be loaded"))
    assert heard.events == [("begin", "a", 2), ("outcome", "a", 2, "distributed")]  # a part is still running
    wholes.outcome(rest.job, Outcome(rest.job.cells[0], HELD))
    wholes.end(rest.job, Finished("digest"))
    assert heard.events[2:] == [("outcome", "a", 2, "forward"),
                                ("end", "a", 2, Finished("digest", "target could not be loaded"))]


def test_the_holder_forks_ranks_only_when_the_run_may_have_distributed_cells():
    from audit.commands.select import resources_selected

    assert resources_selected(()) == ("ranks",) == resources_selected(["gradcheck", "distributed"])
    assert resources_selected(["gradcheck", "compile"]) == ()


def test_every_resource_a_check_names_is_known_and_starts_by_a_function_that_exists():
    import importlib

    from audit.checks import builtin
    from audit.checking.resources import RESOURCES

    named = {check.resource for check in builtin().values() if check.resource}
    assert named and named <= set(RESOURCES)
    for resource in RESOURCES.values():
        module, _, function = resource.start.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), resource

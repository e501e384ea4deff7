"""The engine's entry point, :func:`audit_entries`: plan every entry's cells, serve what the result cache holds,
run the rest in workers, judge each outcome as it arrives, stream progress."""

from __future__ import annotations

import functools
import os
import shlex
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from audit.checking import resources
from audit.core.contract import DEVICE_ORDER, DTYPE_ORDER
from audit.engine.cache import Cache, audit_digest, cell_key, code_fingerprint, spec_digest
from audit.engine.environment import forget as forget_environment, known as stored_environment
from audit.engine.job import Finished, Job
from audit.engine.plan import claims, plan
from audit.engine.pool import Worker, run_jobs
from audit.engine.worker import environment as local_environment
from audit.registry.load import today
from audit.registry.model import Entry, Registry
from audit.core.replays import script_command, script_name
from audit.results.cells import Cell, judge
from audit.results.environment import Environment
from audit.results.outcome import CellKey, Outcome
from audit.runtime.options import RunOptions

if TYPE_CHECKING:
    from audit.catalog.interface import Check


@dataclass(frozen=True)
class EntryResult:
    """An audited entry: the digest of its target and its judged cells in matrix order."""

    entry: Entry
    digest: str | None
    cells: tuple[Cell, ...]
    target_error: str = ""


@dataclass(frozen=True)
class Event:
    """Progress, as the engine streams it: an entry began, a cell was judged, an entry ended. ``done`` and
    ``total`` count entries, ``cells_done`` and ``cells_total`` cells (cached ones included)."""

    kind: str
    entry: Entry
    cell: Cell | None = None
    result: EntryResult | None = None
    done: int = 0
    total: int = 0
    cells_done: int = 0
    cells_total: int = 0


#: Hears every :class:`Event` of a run, as it happens.
OnEvent = Callable[[Event], object]


@dataclass(frozen=True)
class RunResult:
    """Every audited entry, in registry order, the workers' environment, and what the cache served."""

    entries: tuple[EntryResult, ...]
    environment: Environment
    cached: int = 0
    computed: int = 0


def audit_entries(registry: Registry, entries: list[Entry], checks: Mapping[str, Check], options: RunOptions, *,
                  only: Collection[str] | None = None, devices: Collection[str] | None = None,
                  on_event: OnEvent = lambda event: None, workers: list[Worker] | None = None,
                  out: str | None = None, claimed_only: bool = False) -> RunResult:
    """Audit ``entries``; never prints. Cells are judged as they arrive and streamed to ``on_event``.
    ``out``: the folder the caller writes replay scripts to, which a cell's further failures name.
    ``claimed_only``: the claimed cells alone, no unclaimed probe (``audit mutate``'s baseline).

    With ``options.cache_dir``, cells whose every input is unchanged are served from the result cache,
    and only the rest go to workers; an entry with nothing left to compute starts no worker. ``workers``
    already started (see :func:`audit.engine.pool.prestart`) are used, or closed when none is needed.
    """
    jobs = [job for job in (_job(entry, checks, options, only, devices, claimed_only) for entry in entries)
            if job.cells]
    cache = Cache(Path(options.cache_dir), options.cache_size) if options.cache_dir else None
    known = stored_environment(cache.folder) if cache else None  # without torch while its fingerprint holds
    served = _look_up(jobs, checks, options, cache, known) if cache and known is not None else {}
    judging = Judging(checks, registry.path, options, out)
    collector = Collector(jobs, judging, cache, served, on_event)
    left = [job.only(key for key in job.cells if not collector.served(job).has(key)) for job in jobs]
    for job in left:
        if not job.cells:
            collector.begin(job)
            collector.end(job, Finished(collector.served(job).digest))
    pinned = frozenset(name for name, check in checks.items() if check.resource)
    environment = _compute([job for job in left if job.cells], options, collector, workers, known, pinned,
                           resources.needed(checks.values()))
    if cache:
        if environment != known:  # the workers saw another environment than the stored one: ask torch next time
            forget_environment(cache.folder)
        cache.prune()
    return RunResult(entries=tuple(collector.results[job.entry.name] for job in jobs),
                     environment=environment,
                     cached=sum(len(collector.served(job).outcomes) for job in jobs),
                     computed=sum(len(job.cells) for job in left))


def _compute(jobs: list[Job], options: RunOptions, collector: Collector, workers: list[Worker] | None,
             known: Environment | None, pinned: frozenset[str], needed: tuple[str, ...] = ()) -> Environment:
    """Run ``jobs`` in workers (none started when there are none; the ``pinned`` checks' cells in one of them,
    which starts the ``needed`` per-worker resources);
    the workers' environment, or with none started, this process's (``known`` when the result cache's store
    gave it)."""
    if jobs:
        return run_jobs(jobs, options, collector, started=workers, pinned=pinned, resources=needed)
    for worker in workers or ():
        worker.close()
    return known if known is not None else local_environment()


@dataclass(frozen=True)
class Served:
    """What the result cache held for one job: each cell's cache key, the outcomes it served, and the digest of
    the target they were stored with. Empty without a cache, or for an entry whose code has no fingerprint."""

    keys: dict[CellKey, str] = field(default_factory=dict)
    outcomes: dict[CellKey, Outcome] = field(default_factory=dict)
    digest: str | None = None

    def has(self, key: CellKey) -> bool:
        """Whether the cache served the cell ``key``."""
        return key in self.outcomes

    def is_new(self, outcome: Outcome) -> bool:
        """Whether ``outcome`` was computed in this run (not served from the cache)."""
        return self.outcomes.get(outcome.key) is not outcome


def _look_up(jobs: list[Job], checks: Mapping[str, Check], options: RunOptions, cache: Cache,
             environment: Environment) -> dict[str, Served]:
    """What the cache holds for each job's cells, by entry name."""
    audit = audit_digest()
    base, folder = Path(options.base), Path(options.checks_dir) if options.checks_dir else None
    return {job.entry.name: _served(job, checks, options, cache, environment,
                                    code_fingerprint(job.entry, base, folder), audit) for job in jobs}


def _served(job: Job, checks: Mapping[str, Check], options: RunOptions, cache: Cache, environment: Environment,
            code: dict[str, str] | None, audit: str) -> Served:
    if code is None:
        return Served()
    keys: dict[CellKey, str] = {}
    outcomes: dict[CellKey, Outcome] = {}
    digest: str | None = None
    spec = spec_digest(job.entry)
    for key in job.cells:
        keys[key] = cell_key(spec, checks[key.check], key, job.claimed[key], options, environment, code, audit)
        found = cache.get(keys[key])
        if found:
            outcomes[key], digest = found
    return Served(keys, outcomes, digest)


def _job(entry: Entry, checks: Mapping[str, Check], options: RunOptions, only: Collection[str] | None,
         devices: Collection[str] | None, claimed_only: bool = False) -> Job:
    keys = plan(entry, checks, only=only, devices=devices)
    claimed = claims(entry, checks, keys)
    if claimed_only:
        keys = [key for key in keys if claimed[key]]
    return Job(entry, tuple(keys), {key: claimed[key] for key in keys}, options)


@dataclass(frozen=True)
class Judging:
    """What judging a cell takes besides its outcome: the check table, what its replay command names (the registry,
    the run's seed and the settings its check repeats) and the folder its replay scripts go to."""

    checks: Mapping[str, Check]
    registry: str
    options: RunOptions
    out: str | None


class Collector:
    """Hears each job's start, outcomes and end (from the pool, or from the cache alone): judges each outcome,
    stores the fresh ones in the cache, streams :class:`Event` s, and keeps the counts and each entry's result."""

    def __init__(self, jobs: list[Job], judging: Judging, cache: Cache | None, served: dict[str, Served],
                 on_event: OnEvent) -> None:
        self.judging, self.cache, self._served, self.on_event = judging, cache, served, on_event
        self.total, self.cells_total = len(jobs), sum(len(job.cells) for job in jobs)
        self.done = self.cells_done = 0
        self.judged: dict[str, list[Cell]] = {}
        self.fresh: dict[str, list[Outcome]] = {}
        self.results: dict[str, EntryResult] = {}

    def served(self, job: Job) -> Served:
        """What the cache served for ``job``."""
        return self._served.get(job.entry.name) or Served()

    def begin(self, job: Job) -> None:
        """``job`` starts: say so, then judge what the cache served for it."""
        self.on_event(Event("entry_start", job.entry, done=self.done, total=self.total, cells_done=self.cells_done,
                            cells_total=self.cells_total))
        for outcome in self.served(job).outcomes.values():
            self.outcome(job, outcome)

    def outcome(self, job: Job, outcome: Outcome) -> None:
        """Judge ``outcome`` and stream its cell."""
        cell = _judge(job, outcome, self.judging)
        self.judged.setdefault(job.entry.name, []).append(cell)
        if self.served(job).is_new(outcome):
            self.fresh.setdefault(job.entry.name, []).append(outcome)
        self.cells_done += 1
        self.on_event(Event("cell", job.entry, cell=cell, done=self.done, total=self.total,
                            cells_done=self.cells_done, cells_total=self.cells_total))

    def end(self, job: Job, finished: Finished) -> None:
        """``job`` ended: store its fresh outcomes, and stream its result, its cells in matrix order."""
        self.done += 1
        if self.cache and not finished.target_error:
            self._store(job, finished.digest)
        cells = sorted(self.judged.get(job.entry.name, []), key=_order(self.judging.checks))
        result = EntryResult(job.entry, finished.digest, tuple(cells), finished.target_error)
        self.results[job.entry.name] = result
        self.on_event(Event("entry_end", job.entry, result=result, done=self.done, total=self.total))

    def _store(self, job: Job, digest: str | None) -> None:
        keys = self.served(job).keys
        for outcome in self.fresh.get(job.entry.name, []):
            if keys.get(outcome.key) and self.cache:
                self.cache.put(keys[outcome.key], outcome, digest)


def _judge(job: Job, outcome: Outcome, judging: Judging) -> Cell:
    entry, check = job.entry, judging.checks[outcome.key.check]
    return judge(entry, outcome, claimed=job.claimed[outcome.key], claim=check.claim, today=today(),
                 repro=repro_command(entry.name, outcome.key, judging.options.seed, judging.registry,
                                     repeated(check, judging.options)),
                 replays=_replays(entry.name, outcome, judging.out))


def _replays(name: str, outcome: Outcome, out: str | None) -> tuple[str, ...]:
    """The command that runs each of the outcome's failures' replay scripts in ``out`` (none without one)."""
    if out is None or not outcome.others:
        return ()
    key = outcome.key
    return tuple(script_command(out, script_name(name, key.check, key.dtype, key.device, n))
                 for n in range(1, len(outcome.others) + 2))


def _order(checks: Mapping[str, Check]) -> Callable[[Cell], tuple[int, int, int]]:
    names = list(checks)
    return lambda cell: (names.index(cell.check), DTYPE_ORDER.index(cell.dtype), DEVICE_ORDER.index(cell.device))


def repeated(check: Check, options: RunOptions) -> tuple[tuple[str, str], ...]:
    """The settings of ``options`` that a replay of ``check``'s cells repeats (its ``repro_settings``): those that
    are not their default."""
    default = RunOptions()
    return tuple((name, str(getattr(options, name))) for name in check.repro_settings
                 if getattr(options, name) != getattr(default, name))


def repro_command(name: str, key: CellKey, seed: int, registry: str, settings: tuple[tuple[str, str], ...] = ()) -> str:
    """The one command that replays a cell, with the run ``settings`` it repeats (name, value)."""
    command = ["audit", "repro", name, key.check, "--dtype", key.dtype, "--device", key.device, "--seed", str(seed)]
    for setting, value in settings:
        command += [f"--{setting.replace('_', '-')}", value]
    if _names_registry(registry, os.getcwd()):
        command += ["--registry", registry]
    return shlex.join(command)


@functools.lru_cache(maxsize=8)
def _names_registry(registry: str, cwd: str) -> bool:
    """Whether a command run in ``cwd`` must name ``registry`` (it is not ``registry.yaml`` there); once per run,
    not per cell (resolving paths is most of a cached cell's judging)."""
    return Path(registry).name != "registry.yaml" or Path(registry).parent.resolve() != Path(cwd).resolve()


"""``audit mutate``'s engine: audit the entries as ``audit run`` would, then run each mutant's claimed cells that
held (after its equivalence probe) in the same isolated workers, with the same seeds, each mutant a job that stops
at its first failing cell; never prints.

A mutant's result is kept in the result cache under the mutated source, the entry, the code it reads, the audit's
own code and the environment: an unchanged entry is not mutated again.
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from audit.core.contract import Status
from audit.engine.cache import audit_digest, code_fingerprint, spec_digest
from audit.engine.equivalence import probe_key
from audit.engine.job import Finished, Job
from audit.engine.pool import run_jobs
from audit.engine.runner import EntryResult, audit_entries
from audit.mutate.operators import mutations
from audit.mutate.results import EQUIVALENT, ERRORED, KILLED, SURVIVED, EntryMutation, MutantResult, MutationRun
from audit.mutate.sources import Site, sites
from audit.registry.model import Entry, Registry
from audit.results.outcome import CellKey, Outcome, Verdict
from audit.runtime.mutant import PROBE, Mutant
from audit.runtime.options import RunOptions

if TYPE_CHECKING:
    from audit.catalog.interface import Check


@dataclass(frozen=True)
class Planned:
    """A mutant ready to run: what it changes, and the job that runs it."""

    mutant: Mutant
    site: Site
    diff: str
    job: Job
    key: str  #: its result-cache key ("" without a cache)


def mutate(registry: Registry, entries: list[Entry], checks: Mapping[str, Check], options: RunOptions, *,
           min_kill_rate: float | None = None, limit: int | None = None, only: Collection[str] | None = None,
           operators: Collection[str] = (),
           on_progress: Callable[[str], object] = lambda line: None) -> MutationRun:
    """Mutate ``entries`` (at most ``limit`` mutants each, in operator order) and run each mutant's claimed cells
    that held on the original; ``on_progress`` hears one line per phase and per mutant decided. ``only``: judge
    with these checks' cells only; ``operators``: only the mutants whose operator matches one of these glob
    patterns (``scale*``, ``constant*``)."""
    on_progress(f"auditing {len(entries)} entries as they are")
    baseline = audit_entries(registry, entries, checks, options, only=only, claimed_only=True)
    base = Path(options.base)
    planned: dict[str, list[Planned]] = {}
    notes: dict[str, list[str]] = {}
    held: dict[str, tuple[CellKey, ...]] = {}
    for result in baseline.entries:
        name = result.entry.name
        held[name], notes[name] = _held(result)
        found = sites(result.entry, base)
        notes[name] += list(found.notes)
        if not found.sites:
            notes[name].append("no Python function of this entry to mutate (native code, or none found)")
        if not held[name]:
            continue
        planned[name] = _planned(result.entry, found.sites, held[name], options, limit, tuple(operators),
                                 repr(baseline.environment))
    cache = _Store(Path(options.cache_dir) / "mutants") if options.cache_dir else None
    done: dict[str, MutantResult] = {}
    todo: list[Planned] = []
    for plans in planned.values():
        for plan in plans:
            cached = cache.get(plan.key) if cache and plan.key else None
            if cached is not None:
                done[plan.job.entry.name] = replace(cached, cached=True)
            else:
                todo.append(plan)
    on_progress(f"{sum(map(len, planned.values()))} mutants, {len(done)} served by the cache, {len(todo)} to run")
    if todo:
        listener = _Listener({p.job.entry.name: p for p in todo}, base, on_progress)
        run_jobs([p.job for p in todo], options, listener)
        for plan in todo:
            decided = listener.results[plan.job.entry.name]
            done[plan.job.entry.name] = decided
            if cache and plan.key and decided.fate != ERRORED:
                cache.put(plan.key, decided)
    return MutationRun(tuple(
        EntryMutation(r.entry.name, r.entry.owners,
                      tuple(done[p.job.entry.name] for p in planned.get(r.entry.name, ())),
                      tuple(_label(k) for k in held[r.entry.name]), tuple(notes[r.entry.name]))
        for r in baseline.entries), min_kill_rate)


def _held(result: EntryResult) -> tuple[tuple[CellKey, ...], list[str]]:
    """The entry's claimed cells that held, and notes on the claimed cells left out (they did not hold)."""
    keys, notes = [], []
    for cell in result.cells:
        if not cell.claimed:
            continue
        if cell.status == Status.PASS:
            keys.append(CellKey(cell.check, cell.dtype, cell.device))
        elif cell.status != Status.SKIP:
            notes.append(f"{_label(CellKey(cell.check, cell.dtype, cell.device))} is {cell.status.value} on the "
                         "original: not used to judge mutants")
    if result.target_error:
        notes.append(f"the target could not be loaded: {result.target_error}")
    elif not keys:
        notes.append("no claimed cell holds on the original: nothing to judge mutants with")
    return tuple(keys), notes


def _planned(entry: Entry, found: tuple[Site, ...], cells: tuple[CellKey, ...], options: RunOptions,
             limit: int | None, operators: tuple[str, ...], environment: str) -> list[Planned]:
    probe = probe_key(entry)
    claimed = {probe: True, **dict.fromkeys(cells, True)}
    common = _common_key(entry, options, cells, environment)
    deciding = replace(options, failures=1, shrink=False)  # the first failing example kills: no shrinking, no search on
    plans: list[Planned] = []
    number = 0
    for site in found:
        for change in mutations(site.source, site.line, site.role):
            number += 1  # numbered before any filter: m7 is the same mutant whatever is selected
            if operators and not any(fnmatch.fnmatchcase(change.operator, p) for p in operators):
                continue
            mutant = Mutant(site.module, site.qualname, change.source, number, change.operator)
            job = Job(replace(entry, name=f"{entry.name}#m{number}"), (probe, *cells), claimed, deciding, mutant)
            key = (hashlib.sha256(json.dumps([common, site.qualname, change.source]).encode()).hexdigest()
                   if common else "")
            plans.append(Planned(mutant, site, change.diff, job, key))
            if limit is not None and len(plans) >= limit:
                return plans
    return plans


def _common_key(entry: Entry, options: RunOptions, cells: tuple[CellKey, ...], environment: str) -> str:
    """What every mutant's cache key of ``entry`` shares (the entry, the code it reads, the audit's code, the
    ``environment`` the baseline ran in, the options that change an outcome, the cells); "" where the code has no
    fingerprint."""
    if not options.cache_dir:
        return ""
    code = code_fingerprint(entry, Path(options.base), Path(options.checks_dir) if options.checks_dir else None)
    if code is None:
        return ""
    chosen = {"examples": options.examples, "seed": options.seed, "backend": options.compile_backend}
    return json.dumps([spec_digest(entry), code, audit_digest(), environment, chosen, [asdict(k) for k in cells]],
                      sort_keys=True)


class _Listener:
    """Hears each mutant's job: its probe and cells, then its fate."""

    def __init__(self, plans: dict[str, Planned], base: Path, on_progress: Callable[[str], object]) -> None:
        self.plans, self.base, self.on_progress = plans, base, on_progress
        self.outcomes: dict[str, list[Outcome]] = {}
        self.results: dict[str, MutantResult] = {}

    def begin(self, job: Job) -> None:
        self.outcomes[job.entry.name] = []

    def outcome(self, job: Job, outcome: Outcome) -> None:
        self.outcomes[job.entry.name].append(outcome)

    def end(self, job: Job, finished: Finished) -> None:
        plan = self.plans[job.entry.name]
        result = fate(plan, self.outcomes.get(job.entry.name, []), finished)
        self.results[job.entry.name] = result
        self.on_progress(f"{job.entry.name} {result.fate}{f' by {result.killed_by}' if result.killed_by else ''}: "
                         f"{result.diff}")


def fate(plan: Planned, outcomes: list[Outcome], finished: Finished) -> MutantResult:
    """A mutant's fate from its job's outcomes (the probe's first)."""
    from audit.mutate.suggest import suggestion

    mutant = plan.mutant
    base = MutantResult(mutant.number, f"{mutant.module}:{mutant.qualname}", mutant.operator, plan.diff, ERRORED)
    if finished.target_error:
        return replace(base, reason=f"the target could not be loaded: {finished.target_error}")
    probe = next((o for o in outcomes if o.key.check == PROBE), None)
    differs = dict(probe.details.get("differs", {})) if probe else {}
    if probe is None:
        return replace(base, reason="the equivalence probe did not run")
    if probe.verdict == Verdict.ERRORED:
        return replace(base, reason=probe.message)
    if probe.verdict == Verdict.SKIPPED:
        return replace(base, fate=EQUIVALENT, reason=probe.message, differs=differs)
    passed = tuple(_label(o.key) for o in outcomes if o.key.check != PROBE and o.verdict in (Verdict.HELD,
                                                                                                Verdict.SKIPPED))
    for o in outcomes:
        if o.key.check == PROBE:
            continue
        if o.verdict == Verdict.VIOLATED:
            return replace(base, fate=KILLED, killed_by=_label(o.key), reason=o.message.splitlines()[0][:300],
                           passed=passed, differs=differs)
        if o.verdict == Verdict.ERRORED:
            return replace(base, killed_by=_label(o.key), reason=o.message.splitlines()[0][:300], passed=passed,
                           differs=differs)
    ran = [o for o in outcomes if o.key.check != PROBE]
    if len(ran) < len(plan.job.cells) - 1:
        return replace(base, reason="its job ended before every cell ran", passed=passed, differs=differs)
    return replace(base, fate=SURVIVED, reason=probe.message, passed=passed, differs=differs,
                   suggestion=suggestion(plan.job.entry, differs))


def _label(key: CellKey) -> str:
    return f"{key.check} {key.dtype} {key.device}"


class _Store:
    """Mutant results kept as JSON files, one per cache key."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def get(self, key: str) -> MutantResult | None:
        path = self.folder / f"{key}.json"
        try:
            data = json.loads(path.read_text())
            return MutantResult(**{**data, "passed": tuple(data["passed"])})
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, key: str, result: MutantResult) -> None:
        from audit.core.io import write_atomic

        self.folder.mkdir(parents=True, exist_ok=True)
        write_atomic(self.folder / f"{key}.json", json.dumps(asdict(result)))

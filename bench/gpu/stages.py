"""The stages of the acceptance run, each a function of the run's :class:`Context` and the seconds it may take.

Every command is this checkout's code run by this Python (``python -m audit``, ``python -m pytest``, ``python -m
bench.gpu.facts``) with the checkout first on ``PYTHONPATH``: nothing is installed, nothing is fetched, and the
package's own entry points (the ``audit`` script, the pytest plugin) are not needed.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable

from audit.core.contract import Status as CellStatus
from bench.gpu import compare, junit, processes
from bench.gpu.deadline import Deadline
from bench.gpu.plants import PLANTS, REGISTRY as PLANTED
from bench.gpu.processes import Command, Finished
from bench.gpu.results import Status, StageResult

#: Examples per claimed cell in the planted runs: each bug is caught on its first.
PLANTED_EXAMPLES = 10
#: Failing cells or tests a stage lists by name; the rest are counted.
LISTED = 20


@dataclass(frozen=True)
class Context:
    """What every stage needs: the checkout, the run's folder, the Python to run, the environment of its commands,
    the deadline, and how many processes may run at once."""

    root: Path
    out: Path
    python: str
    env: dict
    deadline: Deadline
    jobs: int = 4
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)

    def module(self, name: str, *args: str) -> tuple[str, ...]:
        """``python -m name args``."""
        return (self.python, "-m", name, *args)

    def folder(self, stage: str) -> Path:
        """The stage's own folder, under the run's."""
        return self.out / "stages" / stage

    def relative(self, path: Path) -> str:
        """``path`` as the summary names it: from the run's folder."""
        try:
            return str(path.relative_to(self.out))
        except ValueError:
            return str(path)


@dataclass(frozen=True)
class Stage:
    """A stage: its name, its budget in seconds, whether it needs a CUDA device, what it does, and its function."""

    name: str
    budget: float
    needs_cuda: bool
    what: str
    run: Callable[[Context, float], StageResult]


def child_env(root: Path, base: dict) -> dict:
    """The environment of every command: ``base`` with the checkout first on ``PYTHONPATH``, output unbuffered, and
    no ``TRITON_INTERPRET`` (Triton kernels run natively on the GPU, as the audit decides by itself)."""
    env = {key: value for key, value in base.items() if key != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), base.get("PYTHONPATH")]))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def environment(ctx: Context, allowed: float) -> tuple[StageResult, dict]:
    """The machine's facts (:mod:`bench.gpu.facts`), and both registries validated (no torch, and no jsonschema
    needed for a valid one); fails when either registry is refused or ``audit`` is not this checkout's."""
    folder = ctx.folder("environment")
    facts_file = folder / "facts.json"
    steps = [Command(ctx.module("bench.gpu.facts", str(facts_file)), folder / "facts.log"),
             Command(ctx.module("audit", "validate", "registry.yaml", str(PLANTED)),
                     folder / "validate.log")]
    ended = processes.run_all(steps, allowed, parallel=2, cwd=ctx.root, env=ctx.env)
    command = " && ".join(map(str, steps))
    if any(not step.started or step.timed_out for step in ended):
        return StageResult("environment", Status.TIMED_OUT, f"stopped after {allowed:.0f} s", command=command,
                           log=ctx.relative(folder)), {}
    try:
        facts = json.loads(facts_file.read_text())
    except (OSError, ValueError) as exc:
        return StageResult("environment", Status.ERROR, f"no facts ({exc})", command=command,
                           log=ctx.relative(folder), tail=processes.tail(steps[0].log)), {}
    problems = _environment_problems(facts, ended[1], ctx)
    status = Status.FAIL if problems else Status.PASS
    return StageResult("environment", status, _described(facts), problems=tuple(problems), command=command,
                       log=ctx.relative(folder), tail=processes.tail(steps[1].log) if problems else ""), facts


def _environment_problems(facts: dict, validated: Finished, ctx: Context) -> list[str]:
    problems = []
    if facts.get("audit") != str((ctx.root / "audit").resolve()):
        problems.append(f"audit is imported from {facts.get('audit')}, not from this checkout ({ctx.root})")
    if validated.returncode != 0:
        problems.append(f"audit validate refused a registry (exit {validated.returncode})")
    return problems


def _described(facts: dict) -> str:
    return (f"torch {facts.get('torch')} (CUDA {facts.get('cuda') or 'none'}), triton {facts.get('triton')}, "
            f"GPU {facts.get('gpu') or 'none'}; jsonschema {'importable' if facts.get('jsonschema') else 'absent'}")


def cuda_missing(facts: dict) -> str:
    """Why the stages that need CUDA cannot run here ("" when they can)."""
    if not facts:
        return "the environment stage gave no facts"
    return "" if facts.get("cuda_available") else facts.get("why_no_cuda") or "no CUDA device here"


def pytest_gpu(ctx: Context, allowed: float) -> StageResult:
    """``pytest -m gpu`` over tests/: passes when every test marked gpu passes (or skips) and one at least ran."""
    folder = ctx.folder("pytest")
    report = folder / "junit.xml"
    command = Command(ctx.module("pytest", "-m", "gpu", "-p", "no:cacheprovider", "-q", "-rs",
                                 f"--junitxml={report}", "tests"), folder / "pytest.log")
    ended = processes.run(command, allowed, cwd=ctx.root, env=ctx.env)
    if ended.timed_out:
        return _done("pytest", Status.TIMED_OUT, f"stopped after {allowed:.0f} s", ctx, command)
    try:
        found = junit.read(report)
    except (OSError, junit.ET.ParseError) as exc:
        return _done("pytest", Status.ERROR, f"pytest exited {ended.returncode} without a report ({exc})", ctx,
                     command)
    status = Status.PASS if ended.returncode == 0 and found.passed else Status.FAIL
    detail = f"{found.passed} passed, {found.failed} failed, {found.skipped} skipped"
    if not found.passed:
        detail += ": no test marked gpu passed"
    return _done("pytest", status, detail, ctx, command, counts=found.counts(), problems=found.failures[:LISTED],
                 notes=found.skips[:LISTED])


def registry_cuda(ctx: Context, allowed: float) -> StageResult:
    """``audit run --device cuda`` on this repository's registry: passes when its gate passes (exit 0)."""
    folder = ctx.folder("registry")
    command = Command(ctx.module("audit", "run", "--registry", "registry.yaml", "--device", "cuda", "--out",
                                 str(folder / "reports"), "--progress", "off", "-j", str(ctx.jobs), "--no-cache"),
                      folder / "audit.log")
    ended = processes.run(command, allowed, cwd=ctx.root, env=ctx.env)
    if ended.timed_out:
        return _done("registry", Status.TIMED_OUT, f"stopped after {allowed:.0f} s", ctx, command)
    try:
        matrix = json.loads((folder / "reports" / "matrix.json").read_text())
    except (OSError, ValueError):
        return _done("registry", Status.ERROR, f"audit run exited {ended.returncode} without a matrix", ctx, command)
    summary = matrix.get("summary", {})
    status = Status.PASS if ended.returncode == 0 else Status.FAIL
    detail = f"exit {ended.returncode}: " + ", ".join(f"{count} {name}" for name, count in sorted(summary.items()))
    return _done("registry", status, detail, ctx, command, counts=tuple(sorted(summary.items())),
                 problems=tuple(_gating(matrix))[:LISTED])


def _gating(matrix: dict):
    for entry in matrix.get("entries", []):
        for cell in entry.get("cells", []):
            if CellStatus(cell["status"]).gates(strict=False):
                yield (f"{entry['name']} {cell['check']} ({cell['dtype']}, {cell['device']}): {cell['status']}: "
                       f"{compare.quoted(cell.get('message', ''))}")


def planted(ctx: Context, allowed: float) -> StageResult:
    """Each plant of :data:`bench.gpu.plants.PLANTS` audited by a run of its own (``ctx.jobs`` at a time), its
    matrix held to the plant's expectations: passes when every expectation is met."""
    folder = ctx.folder("planted")
    commands = [Command(planted_argv(ctx, plant, folder / plant.name), folder / f"{plant.name}.log")
                for plant in PLANTS]
    ended = processes.run_all(commands, allowed, parallel=ctx.jobs, cwd=ctx.root, env=ctx.env)
    problems, met = [], 0
    for plant, finished, command in zip(PLANTS, ended, commands):
        missed = _plant_mismatches(plant, finished, folder / plant.name, ctx.relative(command.log))
        problems += [f"{plant.name}: {m}" for m in missed]
        met += not missed
    status = Status.PASS if not problems else Status.FAIL
    detail = f"{met} of {len(PLANTS)} plants as expected"
    return StageResult("planted", status, detail, counts=(("met", met), ("missed", len(PLANTS) - met)),
                       problems=tuple(problems), command=str(commands[0]) + " (one run per plant)",
                       log=ctx.relative(folder))


def planted_argv(ctx: Context, plant, out: Path) -> tuple[str, ...]:
    """The ``audit run`` of one plant: its two entries, the bug first, in one worker; its checks and devices."""
    picks = [arg for name in (plant.bug, plant.twin) for arg in ("--select", name)]
    checks = [arg for name in plant.checks for arg in ("--check", name)]
    devices = [arg for name in plant.devices for arg in ("--device", name)]
    return ctx.module("audit", "run", "--registry", str(PLANTED), *picks, *checks, *devices,
                      "-j", "1", "--examples", str(PLANTED_EXAMPLES), "--out", str(out), "--progress", "off",
                      "--no-cache", *plant.flags)


def _plant_mismatches(plant, finished: Finished, out: Path, log: str) -> tuple:
    if not finished.started:
        return compare.not_run(plant, "not started: the stage's time ran out")
    if finished.timed_out:
        return compare.not_run(plant, f"its run was stopped at the stage's time limit (log: {log})")
    try:
        matrix = json.loads((out / "matrix.json").read_text())
    except (OSError, ValueError):
        return compare.not_run(plant, f"its run exited {finished.returncode} without a matrix (log: {log})")
    return compare.mismatches(plant, matrix)


def _done(name: str, status: Status, detail: str, ctx: Context, command: Command, **found) -> StageResult:
    """A stage's result from its one command; the log's tail kept unless it passed."""
    tail = processes.tail(command.log) if status != Status.PASS else ""
    return StageResult(name, status, detail, command=str(command), log=ctx.relative(command.log), tail=tail, **found)


#: The stages that follow the environment, in the order they run. With the environment's budget their budgets add
#: up to the deadline less its reserve (45 + 190 + 100 + 135 = 470 s of 480); what one leaves unused, the next may
#: take (:meth:`bench.gpu.deadline.Deadline.allowance`).
STAGES = (
    Stage("pytest", 190, True, "pytest -m gpu over tests/", pytest_gpu),
    Stage("registry", 100, True, "audit run --device cuda on registry.yaml", registry_cuda),
    Stage("planted", 135, True, "the planted CUDA registry, each bug beside its twin, against its expectations",
          planted),
)
#: The environment stage's budget.
ENVIRONMENT_BUDGET = 45


def select(names) -> tuple[Stage, ...]:
    """The stages named (all when none is), in run order; raises ``ValueError`` naming an unknown one."""
    known = {stage.name: stage for stage in STAGES}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown stage {unknown[0]!r}; the stages are {', '.join(known)}")
    return tuple(stage for stage in STAGES if not names or stage.name in names)

"""The acceptance run's summary: JSON for tools, Markdown for people (pure functions), written side by side."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bench.gpu.results import Status, Summary

SCHEMA = "gpu-acceptance/1"
JSON_NAME, MARKDOWN_NAME = "summary.json", "summary.md"


def to_json(summary: Summary) -> str:
    """The summary as JSON: sorted keys, each stage in run order, the verdict and the exit code."""
    document = {"schema": SCHEMA, "started": summary.started, "seconds": summary.seconds,
                "deadline_seconds": summary.deadline, "facts": summary.facts,
                "stages": [_stage(stage) for stage in summary.stages],
                "verdict": "pass" if summary.passed else "fail", "exit_code": summary.exit_code}
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _stage(stage) -> dict:
    found = asdict(stage)
    found["status"] = stage.status.value
    found["counts"] = dict(stage.counts)
    return found


def to_markdown(summary: Summary) -> str:
    """The summary as Markdown: the verdict, the machine, a table of the stages, then what each stage that did not
    pass found, with its log's last lines."""
    facts = summary.facts
    lines = [f"# GPU acceptance: {'PASS' if summary.passed else 'FAIL'}", "",
             f"torch {facts.get('torch')} (CUDA {facts.get('cuda') or 'none'}), triton {facts.get('triton')}, GPU "
             f"{facts.get('gpu') or 'none'}, Python {facts.get('python')}; jsonschema "
             f"{'importable' if facts.get('jsonschema') else 'not installed'}. Started {summary.started}; "
             f"{summary.seconds:.0f} s of the {summary.deadline:.0f} s deadline.", "",
             "| stage | status | seconds | what happened |", "|---|---|---:|---|"]
    lines += [f"| {s.name} | {s.status.value} | {s.seconds:.0f} | {_cell(s.detail)} |" for s in summary.stages]
    for stage in summary.stages:
        lines += _section(stage)
    return "\n".join(lines) + "\n"


def _section(stage) -> list[str]:
    """What a stage found, unless there is nothing more than its row (a pass or a skip, with no problem or note)."""
    if stage.status in (Status.PASS, Status.SKIPPED) and not (stage.problems or stage.notes):
        return []
    lines = ["", f"## {stage.name}: {stage.status.value}", "", stage.detail, ""]
    lines += [f"- {problem}" for problem in stage.problems]
    lines += [f"- note: {note}" for note in stage.notes]
    if stage.command:
        lines += ["", f"Command: `{stage.command}`" + (f"; log: `{stage.log}`" if stage.log else "")]
    if stage.tail:
        lines += ["", "```text", stage.tail, "```"]
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def write(summary: Summary, folder: Path) -> tuple[Path, Path]:
    """Write ``summary.json`` and ``summary.md`` into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / JSON_NAME, folder / MARKDOWN_NAME
    paths[0].write_text(to_json(summary))
    paths[1].write_text(to_markdown(summary))
    return paths

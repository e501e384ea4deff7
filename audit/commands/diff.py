"""``audit diff OLD NEW``: every regression between two matrices; exit 1 on any."""

from __future__ import annotations

import json
from pathlib import Path

import click

from audit.contract import Exit
from audit.errors import UsageError
from audit.reporters.changes import render_markdown, render_text
from audit.results.changes import check_matrix, diff
from audit.results.matrix import write_atomic


def diff_command(old: str, new: str, output_format: str, out: str | None) -> int:
    """Compare ``old`` with ``new``; print (or write to ``out``) in the chosen format."""
    result = diff(read_matrix(old), read_matrix(new))
    if output_format == "json":
        text = json.dumps(result.to_json(), indent=2, sort_keys=True) + "\n"
    elif output_format == "md":
        text = render_markdown(result)
    else:
        text = render_text(result)
    if out:
        write_atomic(Path(out), text)
    else:
        click.echo(text, nl=False)
    return Exit.GATE_FAILED if result.regressed else Exit.OK


def read_matrix(path: str) -> dict:
    """A matrix file, or a usage error that names the file and what is wrong with it."""
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"{path}: no such file")
    try:
        data = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}:{exc.lineno}:{exc.colno}: not JSON: {exc.msg}") from None
    return check_matrix(data, path)

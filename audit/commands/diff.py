"""``audit diff OLD NEW``: every regression between two matrices; exit 1 on any."""

from __future__ import annotations

from pathlib import Path

import click

from audit.core.contract import Exit
from audit.core.io import json_text, write_atomic
from audit.reporters.changes import render_markdown, render_text
from audit.results.changes import diff
from audit.results.matrix import read_matrix


def diff_command(old: str, new: str, output_format: str, out: str | None) -> int:
    """Compare ``old`` with ``new``; print (or write to ``out``) in the chosen format."""
    result = diff(read_matrix(old), read_matrix(new))
    if output_format == "json":
        text = json_text(result.to_json())
    elif output_format == "md":
        text = render_markdown(result)
    else:
        text = render_text(result)
    if out:
        write_atomic(Path(out), text)
    else:
        click.echo(text, nl=False)
    return Exit.GATE_FAILED if result.regressed else Exit.OK

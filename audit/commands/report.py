"""``audit report MATRIX``: any report, re-rendered from a saved matrix."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from audit.app import publish
from audit.app.console import color
from audit.core.contract import Exit
from audit.core.io import write_atomic
from audit.results.matrix import read_matrix


def report(matrix_path: str, output_format: str, by_owner: bool, out: str | None, verbosity: int = 0,
           quiet: bool = False, owner: str | None = None) -> int:
    """Render ``matrix_path`` in ``output_format`` to ``out`` or stdout (``owner``'s causes of failure first).
    Rendering is not gating: exit 0."""
    matrix = read_matrix(matrix_path)
    colored = out is None and color(sys.stdout)
    text = publish.render(matrix, output_format, by_owner=by_owner, color=colored, verbosity=-1 if quiet else verbosity,
                          owner=owner)
    if out:
        write_atomic(Path(out), text)
    else:
        click.echo(text, nl=False, color=colored)  # click would strip the colours FORCE_COLOR asked for
    if output_format == "github":
        publish.github_summary(matrix, owner)
    return Exit.OK

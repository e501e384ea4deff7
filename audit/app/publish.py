"""Every report of a matrix, written together (run and merge), one at a time (``audit report``) or shown on
stdout; what ``audit run`` and ``audit merge`` both leave in ``--out``."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from audit.app.console import color
from audit.core.io import write_atomic
from audit.reporters import github, html, junit, markdown, sarif, terminal
from audit.results.matrix import Matrix

#: What ``audit run`` and ``audit merge`` write beside the matrix.
FILES = {"matrix.md": lambda m, owner: markdown.render(m, owner=owner),
         "matrix.html": lambda m, owner: html.render(m, owner=owner), "junit.xml": lambda m, owner: junit.render(m)}
FORMATS = ("text", "md", "html", "junit", "github", "json", "sarif")


def write_all(folder: Path, matrix: Matrix, owner: str | None = None) -> None:
    """``matrix.json`` last, so that its presence means every other report is there too; ``owner``'s causes of
    failure first in each."""
    for name, render in FILES.items():
        write_atomic(folder / name, render(matrix, owner))
    write_atomic(folder / "matrix.json", matrix.to_text())


def drop_stale_scripts(out: Path, kept: set[str]) -> None:
    """Remove replay scripts an earlier run left in ``out/repro``: only this run's failures replay."""
    folder = out / "repro"
    for stale in sorted(folder.glob("*.py")) if folder.is_dir() else ():
        if stale.name not in kept:
            stale.unlink()


def show(matrix: Matrix, output_format: str, verbosity: int = 0, owner: str | None = None) -> None:
    """The report on stdout: text, GitHub's annotations before it (and its job summary), or the matrix
    as JSON for tools; ``owner``'s causes of failure first."""
    colored = output_format == "text" and color(sys.stdout)
    click.echo(render(matrix, output_format, color=colored, width=_width(), verbosity=verbosity, owner=owner),
               nl=False, color=colored)
    if output_format == "github":
        github_summary(matrix, owner)


def _width() -> int:
    import shutil

    return max(100, shutil.get_terminal_size((160, 24)).columns)


def render(matrix: Matrix, output_format: str, *, by_owner: bool = False, color: bool = False, width: int = 160,
           verbosity: int = 0, owner: str | None = None) -> str:
    """One report as text; ``owner``: that owner's causes of failure first."""
    if output_format == "json":
        return matrix.to_text()
    if output_format == "sarif":
        return sarif.render(matrix, contracts())
    if output_format == "md":
        return markdown.render(matrix, by_owner=by_owner, owner=owner)
    if output_format == "html":
        return html.render(matrix, by_owner=by_owner, owner=owner)
    if output_format == "junit":
        return junit.render(matrix)
    text = terminal.render(matrix, color=color, width=width, by_owner=by_owner, verbosity=verbosity, owner=owner)
    if output_format == "github":
        return github.annotations(matrix) + github.inert(text)
    return text


def contracts() -> dict[str, str]:
    """What each built-in check proves (from the declarations: no torch import)."""
    from audit.checks import declarations

    return {name: check.contract for name, check in declarations().items()}


def github_summary(matrix: Matrix, owner: str | None = None) -> bool:
    """Append the job summary to ``$GITHUB_STEP_SUMMARY`` when GitHub set it; whether it did."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(github.summary(matrix, owner))
    return True

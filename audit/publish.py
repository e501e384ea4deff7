"""Every report of a matrix, written together (run and merge) or one at a time (``audit report``)."""

from __future__ import annotations

import os
from pathlib import Path

from audit.reporters import github, html, junit, markdown, sarif, terminal
from audit.results import matrix as matrix_mod

#: What ``audit run`` and ``audit merge`` write beside the matrix.
FILES = {"matrix.md": markdown.render, "matrix.html": html.render, "junit.xml": junit.render}
FORMATS = ("text", "md", "html", "junit", "github", "json", "sarif")


def write_all(folder: Path, matrix: dict) -> None:
    """``matrix.json`` last, so that its presence means every other report is there too."""
    for name, render in FILES.items():
        matrix_mod.write_atomic(folder / name, render(matrix))
    matrix_mod.write_atomic(folder / "matrix.json", matrix_mod.dumps(matrix))


def render(matrix: dict, output_format: str, *, by_owner: bool = False, color: bool = False, width: int = 160,
           verbosity: int = 0) -> str:
    """One report as text."""
    if output_format == "json":
        return matrix_mod.dumps(matrix)
    if output_format == "sarif":
        return sarif.render(matrix, contracts())
    if output_format == "md":
        return markdown.render(matrix, by_owner=by_owner)
    if output_format == "html":
        return html.render(matrix, by_owner=by_owner)
    if output_format == "junit":
        return junit.render(matrix)
    text = terminal.render(matrix, color=color, width=width, by_owner=by_owner, verbosity=verbosity)
    if output_format == "github":
        return github.annotations(matrix) + github.inert(text)
    return text


def contracts() -> dict[str, str]:
    """What each built-in check proves (from the declarations: no torch import)."""
    from audit.checks import declarations

    return {name: check.contract for name, check in declarations().items()}


def github_summary(matrix: dict) -> bool:
    """Append the job summary to ``$GITHUB_STEP_SUMMARY`` when GitHub set it; whether it did."""
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if not path:
        return False
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(github.summary(matrix))
    return True

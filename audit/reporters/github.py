"""GitHub Actions: error annotations on the registry line of each failing entry, and a job summary.

GitHub shows only the first few annotations of a step, so the full report is printed after them; the
summary (verdict, failures, the matrix folded away) is kept under GitHub's 1 MiB limit.
"""

# No ``from __future__ import annotations`` here: it binds the name ``annotations``, this module's main function
# (the annotations below need no postponing: every name they use is imported).
from audit.reporters import causes, markdown
from audit.reporters.common import also_lines, headline, markdown_text, printable, problems, registry_of
from audit.results.causes import Cause
from audit.results.matrix import Matrix

#: GitHub refuses a step summary over 1 MiB; stay well clear of it.
SUMMARY_LIMIT = 900 * 1024


def annotations(matrix: Matrix) -> str:
    """One ``::error`` workflow command per failing or erroring cell (``::warning`` for an unclaimed one, which
    never gates), at its entry's registry line."""
    registry = registry_of(matrix)
    lines = []
    for entry, cell in problems(matrix):
        title = f"{entry.name} {cell.check} {cell.status.value.upper()} ({cell.dtype}, {cell.device})"
        message = "\n".join([cell.message, f"owner: {', '.join(entry.owners)}", f"repro: {cell.repro}",
                             *also_lines(cell)])
        level = "error" if cell.claimed else "warning"  # an unclaimed cell never gates
        lines.append(f"::{level} file={_property(registry)},line={entry.registry_line},"
                     f"title={_property(title)}::{_data(message)}")
    return "\n".join(lines) + ("\n" if lines else "")


def inert(text: str) -> str:
    """``text`` (the plain report printed after the annotations) wrapped in ``::stop-commands::``, so
    that no line of it, whatever a target's message says (``::error::``, ``::add-mask::``), is taken as
    a workflow command. The token is a digest of the text, which the text therefore cannot contain."""
    import hashlib

    token = "audit-" + hashlib.sha256(text.encode()).hexdigest()[:32]
    return f"::stop-commands::{token}\n{text}{'' if text.endswith(chr(10)) else chr(10)}::{token}::\n"


def summary(matrix: Matrix, owner: str | None = None) -> str:
    """Markdown for ``$GITHUB_STEP_SUMMARY``: verdict first, a table of the failures' causes (``owner``'s first),
    the matrix folded away."""
    icon = "✅" if matrix.verdict == "pass" else "❌"
    lines = [f"## {icon} {headline(matrix)}", ""]
    found = causes.grouped(matrix, owner)
    if found:
        lines += ["| # | cause | cells | owners | smallest failing case | replay | likely fix |",
                  "|---|---|---|---|---|---|---|"]
        lines += [_cause_row(number, cause) for number, cause in enumerate(found, 1)]
        lines.append("")
    head = "\n".join(lines)
    full = markdown.render(matrix)
    fold = f"<details><summary>The full matrix</summary>\n\n{full}\n</details>\n"
    if len((head + fold).encode()) > SUMMARY_LIMIT:
        fold = "_The full matrix is too large for a job summary: see the uploaded reports (matrix.html)._\n"
    text = head + "\n" + fold
    if len(text.encode()) > SUMMARY_LIMIT:
        text = text.encode()[:SUMMARY_LIMIT].decode(errors="ignore") + "\n\n_(truncated: see matrix.html)_\n"
    return text


def _cause_row(number: int, cause: Cause) -> str:
    """A row of the causes table: the cause, its cells and entries, owners, its smallest case and its replay."""
    small = cause.smallest
    where = f"{small.entry.name} ({small.cell.dtype}, {small.cell.device}): {small.cell.message}"
    return (f"| {number} | {markdown_text(cause.title)} | {markdown_text(causes.counts(cause))} | "
            f"{markdown_text(', '.join(cause.owners))} | {markdown_text(where)} | "
            f"`{markdown_text(small.cell.repro)}` | "
            f"{markdown_text(cause.fix)} |")


def _data(text: str) -> str:
    return printable(text).replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")

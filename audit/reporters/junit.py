"""The matrix as JUnit XML: one testcase per cell, for CI systems that show test results.

classname is the owner, name is ``entry::check[dtype,device]``; fail is a failure, error an error,
skip/unsupported/waived are skipped with the reason; the environment becomes testsuite properties.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from audit.core.contract import Status
from audit.reporters import causes
from audit.reporters.common import also_lines, headline
from audit.reporters.statuses import PRESENTATION, junit_statuses
from audit.results.causes import Cause
from audit.results.cells import Cell
from audit.results.matrix import Matrix, MatrixEntry

#: Characters XML 1.0 cannot carry at all (control characters other than tab, newline, return).
_ILLEGAL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def render(matrix: Matrix) -> str:
    """JUnit XML text of ``matrix``."""
    cells = list(matrix.pairs())
    counts = {"tests": len(cells), "failures": _count(cells, "failure"), "errors": _count(cells, "error"),
              "skipped": _count(cells, "skipped")}
    seconds = f"{sum(c.seconds for _, c in cells):.3f}"
    root = ET.Element("testsuites", name="autograd-audit", time=seconds, **_strings(counts))
    suite = ET.SubElement(root, "testsuite", name="autograd-audit", time=seconds,
                          timestamp=matrix.created or "", **_strings(counts))
    properties = ET.SubElement(suite, "properties")
    for key, value in sorted((matrix.environment or {}).items()):
        text = ", ".join(value) if isinstance(value, list) else "" if value is None else str(value)
        ET.SubElement(properties, "property", name=key, value=_clean(text))
    ET.SubElement(properties, "property", name="verdict", value=matrix.verdict or "")
    of = {id(m.cell): cause for cause in causes.grouped(matrix) for m in cause.members}
    for entry, cell in cells:
        suite.append(_testcase(matrix, entry, cell, of.get(id(cell))))
    ET.SubElement(suite, "system-out").text = _clean(headline(matrix))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _testcase(matrix: Matrix, entry: MatrixEntry, cell: Cell, cause: Cause | None) -> ET.Element:
    """One cell's testcase; a failing one names its cause (the cause first in the message, for a CI's list)."""
    attributes = {"classname": _clean(", ".join(entry.owners) or "(no owner)"),
                  "name": _clean(f"{entry.name}::{cell.check}[{cell.dtype},{cell.device}]"),
                  "time": f"{cell.seconds:.3f}"}
    if matrix.registry:
        attributes.update(file=_clean(matrix.registry), line=str(entry.registry_line))
    case = ET.Element("testcase", attrib=attributes)
    element, message = PRESENTATION[cell.status].junit, _clean(cell.message)
    said = [f"cause: {cause.title}", *([f"likely fix: {cause.fix}"] if cause.fix else [])] if cause else []
    detail = _clean("\n".join(filter(None, [cell.message, *said, f"owner: {attributes['classname']}",
                                            f"repro: {cell.repro}", *also_lines(cell)])))
    if element in ("failure", "error"):
        first = f"[{cause.title}] {_first_line(message)}" if cause else _first_line(message)
        ET.SubElement(case, element, message=_clean(first), type=cell.status.value).text = detail
    elif element == "skipped":
        ET.SubElement(case, "skipped", message=_clean(f"{cell.status.value}: {message}"))
    elif cell.status is Status.XPASS and message:
        ET.SubElement(case, "system-out").text = message
    return case


def _count(cells, element: str) -> int:
    """How many cells become a test case with ``element`` (failure, error, skipped)."""
    statuses = junit_statuses(element)
    return sum(c.status in statuses for _, c in cells)


def _strings(counts: dict) -> dict:
    return {k: str(v) for k, v in counts.items()}


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def _clean(text: str) -> str:
    return _ILLEGAL.sub("\ufffd", text)

"""The matrix as SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

One rule per cause of failure (:mod:`audit.results.causes`: its one line, the check's contract, the likely fix),
one result per failing or erroring cell of that cause at its entry's registry line, with a fingerprint that stays
put across runs so a viewer tracks the same finding from one commit to the next.
"""

from __future__ import annotations

import hashlib

from audit.core.io import json_text
from audit.reporters import causes
from audit.reporters.causes import rule_id
from audit.reporters.common import also_lines, failure_line, printable, registry_of
from audit.results.causes import Cause, Tier
from audit.results.cells import Cell
from audit.results.matrix import Matrix, MatrixEntry

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(matrix: Matrix, contracts: dict[str, str] | None = None) -> str:
    """SARIF JSON text of ``matrix``; ``contracts`` maps check names to what each check proves."""
    contracts = contracts or {}
    found = causes.grouped(matrix)
    rules = [_rule(cause, contracts.get(cause.check, "")) for cause in found]
    registry = registry_of(matrix)
    results = [_result(m.entry, m.cell, rule_id(cause), i, registry) for i, cause in enumerate(found)
               for m in cause.members]
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "autograd-audit", "informationUri": "https://pypi.org/project/autograd-audit/",
                                "rules": rules}},
            "results": results,
            "properties": {"verdict": "" if matrix.verdict is None else matrix.verdict,
                           "environment": {} if matrix.environment is None else matrix.environment},
        }],
    }
    return json_text(log)


def _rule(cause: Cause, contract: str) -> dict:
    """A cause as a rule: its line, what its check proves, the likely fix and the smallest case's replay."""
    text = contract or f"the {cause.check or ', '.join(cause.checks)} property of autograd-audit"
    fix = f" Likely fix: {cause.fix}." if cause.fix else ""
    level = "error" if cause.tier is not Tier.PROBE else "warning"
    name = cause.check or ", ".join(cause.checks)
    return {"id": rule_id(cause), "name": name, "shortDescription": {"text": printable(cause.title)},
            "fullDescription": {"text": text}, "defaultConfiguration": {"level": level},
            "help": {"text": printable(f"{causes.summary(cause)}.{fix} Replay the smallest failing case: "
                                       f"{cause.smallest.cell.repro}")},
            "properties": {"check": cause.check or ", ".join(cause.checks), "kind": cause.kind,
                           "owners": list(cause.owners)}}


def _result(entry: MatrixEntry, cell: Cell, rule: str, index: int, registry: str) -> dict:
    where = f"{entry.name}|{cell.check}|{cell.dtype}|{cell.device}"
    return {
        "ruleId": rule,
        "ruleIndex": index,
        "level": "error" if cell.claimed else "warning",  # unclaimed: never gates
        "message": {"text": printable("\n".join([failure_line(entry, cell, registry), *also_lines(cell)]))},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": registry},
                                            "region": {"startLine": max(1, int(entry.registry_line))}}}],
        "partialFingerprints": {"autogradAudit/v1": hashlib.sha256(where.encode()).hexdigest()},
        "properties": {"owner": list(entry.owners), "status": cell.status.value, "dtype": cell.dtype,
                       "device": cell.device, "repro": cell.repro},
    }

"""The matrix as SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.

One rule per check present (its contract as the description), one result per failing or erroring cell
at its entry's registry line, with a fingerprint that stays put across runs so a viewer tracks the same
finding from one commit to the next.
"""

from __future__ import annotations

import hashlib

from audit.io import json_text
from audit.reporters.common import also_lines, failure_line, printable, problems, registry_of
from audit.results.cells import Cell
from audit.results.matrix import Matrix, MatrixEntry

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render(matrix: Matrix, contracts: dict[str, str] | None = None) -> str:
    """SARIF JSON text of ``matrix``; ``contracts`` maps check names to what each check proves."""
    contracts = contracts or {}
    found = problems(matrix)
    checks = sorted({c.check for c in matrix.cells()})
    rules = [_rule(name, contracts.get(name, "")) for name in checks]
    index = {name: i for i, name in enumerate(checks)}
    registry = registry_of(matrix)
    log = {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "autograd-audit", "informationUri": "https://pypi.org/project/autograd-audit/",
                                "rules": rules}},
            "results": [_result(entry, cell, index[cell.check], registry) for entry, cell in found],
            "properties": {"verdict": "" if matrix.verdict is None else matrix.verdict,
                           "environment": {} if matrix.environment is None else matrix.environment},
        }],
    }
    return json_text(log)


def _rule(name: str, contract: str) -> dict:
    text = contract or f"the {name} property of autograd-audit"
    return {"id": name, "name": name, "shortDescription": {"text": f"autograd-audit check {name}"},
            "fullDescription": {"text": text}, "defaultConfiguration": {"level": "error"},
            "help": {"text": f"{text}. Replay a failure with the command in its message."}}


def _result(entry: MatrixEntry, cell: Cell, rule: int, registry: str) -> dict:
    identity = f"{entry.name}|{cell.check}|{cell.dtype}|{cell.device}"
    return {
        "ruleId": cell.check,
        "ruleIndex": rule,
        "level": "error" if cell.claimed else "warning",  # unclaimed: never gates
        "message": {"text": printable("\n".join([failure_line(entry, cell, registry), *also_lines(cell)]))},
        "locations": [{"physicalLocation": {"artifactLocation": {"uri": registry},
                                            "region": {"startLine": max(1, int(entry.registry_line))}}}],
        "partialFingerprints": {"autogradAudit/v1": hashlib.sha256(identity.encode()).hexdigest()},
        "properties": {"owner": list(entry.owners), "status": cell.status.value, "dtype": cell.dtype,
                       "device": cell.device, "repro": cell.repro},
    }

"""``audit init``: scaffold a registry, a checks folder, a reports folder and a CI workflow."""

from __future__ import annotations

from pathlib import Path

import click

from audit.core.contract import Exit
from audit.core.errors import UsageError
from audit.core.io import write_atomic

#: Where ``audit init`` puts a copy of the schema, relative to the registry: the modeline then works on
#: every clone (yaml-language-server resolves a relative $schema against the YAML file).
SCHEMA_COPY = ".autograd-audit/registry.schema.json"

REGISTRY = """\
# yaml-language-server: $schema={schema}
# autograd-audit registry: one entry per custom autograd Function, torch.library op, module or model,
# with its owner, its inputs and what it claims to support. `audit scan MODEL --write` drafts entries
# for what a model uses; `audit validate` checks this file; `audit run` audits it.
version: 1
defaults:
  supports: {{dtypes: [float64, float32], devices: [cpu]}}
entries: []
"""

CHECKS_README = """\
# Local checks

A module here that defines `CHECK = audit.catalog.interface.Check(...)` adds a matrix column for the
registry entries that list its name under `checks:`.
"""

WORKFLOW = """\
name: autograd-audit
on:
  pull_request:
  push:
    branches: [main]

jobs:
  audit:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      # Adapt: install torch as your project is tested (this is the CPU wheel), then your own project,
      # so that the registry's targets import.
      - name: Install torch and this project
        run: |
          pip install torch --index-url https://download.pytorch.org/whl/cpu
          pip install -e .
      - uses: actions/cache@v4
        with:
          path: .audit-cache
          key: audit-cache-${{ github.sha }}
          restore-keys: audit-cache-
      # Adapt: OWNER/autograd-audit@REF is the repository (or fork) and tag you take autograd-audit from.
      # The action installs it from its own checkout, validates the registry, audits it (annotations at
      # the registry lines and a job summary on failure) and fails the job when the gate fails.
      - name: Audit
        uses: OWNER/autograd-audit@REF
        with:
          registry: registry.yaml
          profile: premerge
      - name: Upload the reports
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: audit-reports
          path: reports/
"""


def init(directory: str) -> int:
    """Write the scaffold into ``directory``; refuse (exit 2, nothing written) if a registry is there."""
    from audit.registry.schema import schema_path

    root = Path(directory)
    if (root / "registry.yaml").exists():
        raise UsageError(f"{root / 'registry.yaml'} exists: nothing written (audit scan MODEL --write adds entries)")
    files = {
        "registry.yaml": REGISTRY.format(schema=SCHEMA_COPY),
        SCHEMA_COPY: Path(schema_path()).read_text(),
        "checks/README.md": CHECKS_README,
        "reports/.gitkeep": "",
        ".github/workflows/autograd-audit.yml": WORKFLOW,
    }
    for name, text in files.items():
        if not (root / name).exists():
            write_atomic(root / name, text)
            click.echo(f"wrote {root / name}")
    ignore = root / ".gitignore"
    lines = ignore.read_text().splitlines() if ignore.exists() else []
    missing = [line for line in ("/reports/*", "!/reports/.gitkeep", ".audit-cache/") if line not in lines]
    if missing:
        write_atomic(ignore, "\n".join(lines + missing) + "\n")
        click.echo(f"updated {ignore}")
    click.echo(f"next: audit scan pkg.module:build --write, fill in the owners, then audit run (commit {SCHEMA_COPY}: "
               "your editor validates the registry against it; refresh it with cp \"$(audit schema)\" after an "
               "upgrade)")
    return Exit.OK

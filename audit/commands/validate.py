"""``audit validate``: registry files against schema v1, without importing torch."""

from __future__ import annotations

import click

from audit.core.contract import Exit
from audit.core.errors import RegistryError
from audit.registry.load import load_registry


def validate(files) -> int:
    """Validate each file; print every problem; 0 when all are valid, 2 otherwise."""
    code = Exit.OK
    for path in files:
        try:
            registry = load_registry(path)
        except RegistryError as exc:
            click.echo(str(exc), err=True)
            click.echo(f"{path}: {len(exc.problems)} problem{'s' if len(exc.problems) != 1 else ''}", err=True)
            code = Exit.USAGE
            continue
        click.echo(f"{path}: valid ({len(registry.entries)} entries)")
    return code

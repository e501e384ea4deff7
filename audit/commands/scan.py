"""``audit scan``: the custom autograd code a model uses (or its sources define), against the registry."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click

from audit.app.console import color
from audit.core.contract import Exit
from audit.core.errors import UsageError
from audit.core.io import json_text, write_atomic

STATUS_STYLE = {"registered": "green", "UNREGISTERED": "bold red", "not seen": "dim", "info": "blue"}


def scan(model, source, input_shape, dtype, registry, output_format, write, explain=False) -> int:
    """Scan, compare, print; exit 1 when something used is not registered (the intake gate). ``explain``: say why
    each value a stub would hold was chosen."""
    from audit.scan.compare import compare
    from audit.scan.findings import merged

    if not model and not source:
        raise UsageError("give a MODEL (pkg.module:build) to run, or --source PATH to read")
    if write and not model:
        raise UsageError("--write needs observed calls to infer inputs from: scan a MODEL")
    loaded = _registry(registry, required=write)
    findings, info, triple = [], [], False
    if model:
        found, triple = _run_model(model, input_shape, dtype)
        findings += found
    if source:
        from audit.scan.static import scan_sources

        found = scan_sources(source)
        findings += [f for f in found if f.kind in ("function", "op")]
        info += [f for f in found if f.kind not in ("function", "op")]
    findings = merged(findings)
    result = compare(findings, loaded, resolve=bool(model))
    drafted = _drafts(loaded, list(result.unregistered), model, triple) if (write or explain) and model else []
    if output_format == "json":
        extra = {"explain": {e["name"]: e["_why"] + e.get("_notes", []) for e in drafted}} if explain else {}
        click.echo(json_text({**result.to_json(), "notes": [f.to_json() for f in info], **extra}), nl=False)
    else:
        click.echo(_table(result, info, loaded), nl=False)
        if explain:
            click.echo(_explained(drafted), nl=False)
    if write and drafted:
        _write(Path(registry), drafted, list(result.unregistered))
    return Exit.GATE_FAILED if result.unregistered else Exit.OK


def _registry(path: str, *, required: bool):
    from audit.registry.load import load_registry

    if Path(path).is_file():
        return load_registry(path)
    if required:
        raise UsageError(f"{path}: no registry to write stubs into; create one with `audit init`")
    return None


def _run_model(spec: str, shapes, dtype: str):
    import torch

    from audit.kit.models import seeded
    from audit.registry.model import Training
    from audit.runtime.target import TargetError, import_object
    from audit.scan.tracing import scan_batches, scan_model

    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        factory = import_object(spec)
        built = seeded(factory, 0)  # as a kind model entry builds it: the same parameters, the same stubs
    except TargetError as exc:
        raise UsageError(f"MODEL {spec}: {exc}") from None
    if _is_triple(built):  # the kind model factory: several batches, through its own loss
        model, make_batch, loss = built
        return scan_batches(model, _batches(spec, make_batch, Training().batch), loss), True
    if isinstance(built, tuple) and len(built) == 2 and isinstance(built[0], torch.nn.Module):
        model, inputs = built
    elif isinstance(built, torch.nn.Module):
        if not shapes:
            raise UsageError(f"MODEL {spec} returned only a module: give --input-shape for each input (e.g. 2,8)")
        model, inputs = built, tuple(torch.randn(*_shape(s), dtype=getattr(torch, dtype)) for s in shapes)
    else:
        raise UsageError(f"MODEL {spec} must return (model, make_batch, loss) as a kind model factory does, "
                         f"(model, inputs), or an nn.Module; got {type(built).__name__}")
    return scan_model(model, tuple(inputs) if isinstance(inputs, (tuple, list)) else (inputs,)), False


#: Batches a kind model factory's ``make_batch`` is asked for (seeds 0, 1, ...): a stub's domain spans them all.
SCANNED_BATCHES = 4


def _batches(spec: str, make_batch, size: int) -> list:
    """:data:`SCANNED_BATCHES` batches of ``size`` from a kind model factory's ``make_batch`` (seeds 0, 1, ...), each
    a :class:`~audit.kit.models.Batch`; a :class:`UsageError` saying what was expected where one comes in another
    form."""
    from audit.kit.models import BatchError, as_batch

    try:
        return [as_batch(make_batch(size, seed)) for seed in range(SCANNED_BATCHES)]
    except BatchError as exc:
        raise UsageError(f"MODEL {spec}: {exc}") from None


def _is_triple(built) -> bool:
    """Whether a factory returned a kind model's ``(model, make_batch, loss)``."""
    import torch

    return (isinstance(built, tuple) and len(built) == 3 and isinstance(built[0], torch.nn.Module)
            and callable(built[1]) and callable(built[2]))


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.replace("x", ",").split(",") if part.strip())
    except ValueError:
        raise UsageError(f"--input-shape {text!r}: expected sizes like 2,8") from None


def _table(result, info, registry) -> str:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title="custom autograd code", show_lines=False)
    for column in ("status", "kind", "target", "entry", "calls", "where"):
        table.add_column(column, overflow="fold")
    rows = [("registered", f, name) for f, name in result.used] + [("UNREGISTERED", f, "") for f in result.unregistered]
    for status, finding, name in rows:
        table.add_row(Text(status, style=STATUS_STYLE[status]), finding.kind, Text(finding.target), name,
                      str(len(finding.calls)) if finding.calls else "", Text("\n".join(finding.sites[:3])))
    for name in result.unseen:
        table.add_row(Text("not seen", style=STATUS_STYLE["not seen"]), "", "", name, "", "")
    for note in info:
        table.add_row(Text("info", style=STATUS_STYLE["info"]), note.kind, Text(note.target), "", "",
                      Text("\n".join(note.sites[:3])))
    buffer = io.StringIO()
    console = Console(file=buffer, width=160, force_terminal=color(sys.stdout), no_color=not color(sys.stdout))
    console.print(table)
    where = registry.path if registry else "no registry"
    verdict = (f"{len(result.unregistered)} used but unregistered (against {where}): register them "
               "(audit scan MODEL --write drafts the entries)" if result.unregistered
               else f"everything used is registered (against {where})")
    console.print(Text(verdict, style="bold red" if result.unregistered else "bold green"))
    return buffer.getvalue()


def _drafts(registry, findings, model: str, triple: bool) -> list[dict]:
    """The stubs ``--write`` would append: one per unregistered finding, and for a kind model factory the model's
    own entry unless the registry has it."""
    from audit.scan import stubs

    made = stubs.stubs(findings, registry, root=Path.cwd(), load=[model.partition(":")[0]])
    if triple:
        own = stubs.model_stub(model, registry, {e["name"] for e in made}, root=Path.cwd(),
                               source=_module_file(model))
        made += [own] if own else []
    return made


def _module_file(spec: str) -> str:
    import sys

    module = sys.modules.get(spec.partition(":")[0])
    return getattr(module, "__file__", "") or ""


def _explained(drafted: list[dict]) -> str:
    """Why each inferred value of each stub was chosen, and what its notes say."""
    lines = []
    for entry in drafted:
        lines.append(f"{entry['name']} ({entry['target']}):")
        lines += [f"  {why}" for why in entry.get("_why", [])]
        lines += [f"  NOTE: {note}" for note in entry.get("_notes", [])]
    return "\n".join(lines) + "\n" if lines else "nothing to explain: everything used is registered\n"


def _write(path: Path, drafted: list[dict], findings) -> None:
    from audit.scan import stubs

    operators = {id(e): f for e, f in zip(drafted, findings)}
    entries = [e for e in drafted if id(e) not in operators or stubs.importable(operators[id(e)])]
    local = [(e, operators[id(e)]) for e in drafted if id(e) in operators and not stubs.importable(operators[id(e)])]
    text = path.read_text()
    text = stubs.append(text, entries) if entries else text
    if local:
        text = text.rstrip("\n") + "\n\n" + stubs.commented(*map(list, zip(*local)))
    write_atomic(path, text)
    placeholders = sum(e["owner"] == stubs.PLACEHOLDER for e in entries)
    notes = sum(bool(e.get("_notes")) for e in entries)
    click.echo(f"wrote {len(entries)} stub(s) to {path}"
               + (f"; {placeholders} owner(s) to fill in (audit validate refuses the placeholder)"
                  if placeholders else "")
               + (f"; {notes} with a NOTE to read first" if notes else "")
               + (f"; {len(local)} made inside a factory, written as comments saying what to add" if local else ""),
               err=True)

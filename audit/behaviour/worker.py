"""The record worker: ``python -m audit.behaviour.worker SPEC`` records each entry the spec names into its folder.

The spec (JSON, written by :mod:`audit.behaviour.recorder`) names the registry, the entries, the seed, the folder to
write to, the devices to use and the old record's folder whose checkpoints are loaded here (or null). For each entry
the worker first writes ``NAME.current`` (so the parent knows which entry a crash or hang hit), then ``NAME.pt`` (its
tensors) and last ``NAME.json`` (its record): an entry is recorded once its JSON exists. It never prints.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from dataclasses import replace
from pathlib import Path


def file_stem(name: str) -> str:
    """The stem of ``name``'s files in a record's folder: the name with anything but letters, digits, ``.``, ``_``
    and ``-`` as ``_``, then a short hash of the name (two names never share a file)."""
    return f"{re.sub(r'[^A-Za-z0-9._-]', '_', name)[:80]}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"


def main(argv: list[str]) -> int:
    """Record every entry of the spec at ``argv[0]``."""
    spec = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    from audit.runtime.reaper import die_with_parent

    die_with_parent()  # a run killed with SIGKILL takes its record workers with it
    import torch

    from audit.behaviour.numerics import numerics
    from audit.engine import memory
    from audit.registry.load import load_registry

    torch.set_num_threads(1)  # as the audit's workers run every check
    memory.cap(int(spec["max_memory"]))
    folder = Path(spec["folder"])
    (folder / "numerics.json").write_text(json.dumps(numerics()), encoding="utf-8")
    registry = load_registry(spec["registry"])
    for name in spec["entries"]:
        entry = registry.entry(name)
        if entry is not None and spec.get("dtypes"):
            entry = replace(entry, supports=replace(entry.supports, dtypes=tuple(
                d for d in entry.supports.dtypes if d in spec["dtypes"])))
        if entry is not None:
            _record(entry, spec, folder)
    return 0


def _record(entry, spec: dict, folder: Path) -> None:
    """One entry's record into ``folder``: its tensors, then its JSON (the mark that it is done)."""
    import torch

    from audit.behaviour.values import EntryRecord
    from audit.runtime.isolation import isolated

    stem = file_stem(entry.name)
    (folder / f"{stem}.current").write_text(entry.name, encoding="utf-8")
    with isolated():
        try:
            measured = _measured(entry, spec)
            record = measured.record
            torch.save(measured.tensors, folder / f"{stem}.pt")
            record = _within_budget(record, folder / f"{stem}.pt")
        except _NotLoaded as exc:
            record = EntryRecord(entry.name, entry.kind.value, error=f"target could not be loaded: {exc}")
        except Exception as exc:  # the target's own exception, or one of the audit's: said, with where
            record = EntryRecord(entry.name, entry.kind.value, error=_raised(exc))
    (folder / f"{stem}.json").write_text(json.dumps(record.to_json()), encoding="utf-8")


def _within_budget(record, path: Path):
    """``record`` as it is, or, where its tensors' file is over :data:`~audit.behaviour.store.BUDGET_BYTES`, the
    file removed and the record an error saying so."""
    from dataclasses import replace as replaced

    from audit.behaviour.store import BUDGET_BYTES

    size = path.stat().st_size
    if size <= BUDGET_BYTES:
        return record
    path.unlink()
    return replaced(record, values=(), cost=(), error=f"its record is {size >> 20} MiB, over the budget of "
                                                      f"{BUDGET_BYTES >> 20} MiB an entry: narrow its dims")


class _NotLoaded(Exception):
    """The entry's target could not be imported or built."""


def _measured(entry, spec: dict):
    from audit.behaviour.measure import load_state, measure
    from audit.runtime.target import TargetError, resolve

    try:
        target = resolve(entry, Path(spec["base"]))
    except (TargetError, SyntaxError) as exc:
        raise _NotLoaded(str(exc)) from None
    old = None
    if spec.get("against"):
        old_file = Path(spec["against"]) / "entries" / f"{file_stem(entry.name)}.pt"
        old = load_state(old_file) if old_file.is_file() else None
    devices = tuple(d for d in entry.supports.devices if d in spec["devices"] and _available(d))
    return measure(entry, target, spec["seed"], devices, old)


def _available(device: str) -> bool:
    import torch

    if device == "cuda":
        return torch.cuda.is_available()
    if device == "mps":
        return hasattr(torch.backends, "mps") and torch.backends.mps.is_available()
    return True


def _raised(exc: BaseException) -> str:
    """``raised Type: message (at file:line in function)``, at the innermost frame outside torch and the audit."""
    from audit.kit.explain import first_line, user_site

    return f"raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

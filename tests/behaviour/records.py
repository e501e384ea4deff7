"""Behaviour records made in this process (no worker), for fast tests of the comparison: the entries of
tests/fixtures/drift.py measured under an "old" and a "new" value of its module constants."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import yaml

from audit.behaviour import store
from audit.behaviour.measure import measure
from audit.behaviour.worker import file_stem
from audit.registry.load import load_registry
from audit.runtime.target import resolve
from tests.fixtures import drift

ROOT = Path(__file__).resolve().parents[2]

ENTRIES = [
    {"name": "scaled", "kind": "callable", "target": "tests.fixtures.drift:scaled", "inputs": [{"shape": ["N"]}]},
    {"name": "steady", "kind": "callable", "target": "tests.fixtures.drift:steady", "inputs": [{"shape": ["N"]}]},
    {"name": "sine", "target": "tests.fixtures.drift:Sine", "inputs": [{"shape": ["N"]}],
     "supports": {"double_backward": True}},
    {"name": "steady_sine", "target": "tests.fixtures.drift:SteadySine", "inputs": [{"shape": ["N"]}]},
    {"name": "renamed", "kind": "module", "target": "tests.fixtures.drift:renamed", "inputs": [{"shape": ["B", 4]}]},
    {"name": "linear", "kind": "module", "target": "tests.fixtures.drift:linear", "inputs": [{"shape": ["B", 4]}]},
    {"name": "drifting_model", "kind": "model", "target": "tests.fixtures.drift:drifting_model"},
    {"name": "steady_model", "kind": "model", "target": "tests.fixtures.drift:steady_model"},
]


def write_registry(folder: Path, entries=None) -> Path:
    """A registry of ``entries`` (default :data:`ENTRIES`) in ``folder``."""
    path = folder / "registry.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "defaults": {"owner": "@tests"}, "entries": entries or ENTRIES},
                                   sort_keys=False))
    return path


def record(folder: Path, registry: Path, *, new: bool, monkeypatch, seed: int = 0, against: Path | None = None,
           names=None) -> Path:
    """The entries measured with drift's constants at their old or new values, as a reports folder holding
    ``matrix.json`` (just its ``behaviour`` key) and ``behaviour/``; the folder."""
    monkeypatch.setattr(drift, "NEW", new)
    monkeypatch.setattr(drift, "SCALE", 1.0 + 1e-4 if new else 1.0)
    monkeypatch.setattr(drift, "GRAD_FACTOR", 1.0 + 1e-5 if new else 1.0)
    monkeypatch.setattr(drift, "BETA", 1.03 if new else 1.0)
    loaded = load_registry(registry)
    folder.mkdir(parents=True, exist_ok=True)
    behaviour = folder / store.FOLDER
    (behaviour / "entries").mkdir(parents=True, exist_ok=True)
    records, files = [], {}
    for entry in loaded.entries:
        if names and entry.name not in names:
            continue
        target = resolve(entry, ROOT)
        old_state = None
        if against is not None:
            old_file = against / store.FOLDER / "entries" / f"{file_stem(entry.name)}.pt"
            if old_file.is_file():
                old_state = {k.removeprefix("state/"): v for k, v in torch.load(old_file, weights_only=True).items()
                             if k.startswith("state/")}
        measured = measure(entry, target, seed, ("cpu",), old_state)
        files[entry.name] = behaviour / "entries" / f"{file_stem(entry.name)}.pt"
        torch.save(measured.tensors, files[entry.name])
        records.append(measured.record)
    store.write_manifest(behaviour, store.manifest(loaded.sha256, seed, {"torch": torch.__version__},
                                                   {"num_threads": "1"}, records, files))
    (folder / "matrix.json").write_text(json.dumps({"behaviour": store.matrix_key(behaviour)}))
    return folder


def read(folder: Path) -> store.Record:
    """The record of a folder :func:`record` made."""
    found = store.read(str(folder / "matrix.json"), json.loads((folder / "matrix.json").read_text()))
    assert found is not None
    return found

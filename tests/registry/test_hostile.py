"""Hostile registries: each is refused quickly with exit 2, a located message and no traceback."""

from __future__ import annotations

import time

import pytest
from click.testing import CliRunner

from audit.cli import cli

ENTRY = 'version: 1\nentries:\n  - name: a\n    owner: "@a"\n    target: m:F\n    inputs: [{shape: [N]}]\n'
LAUGHS = ("version: 1\nx0: &x0 [a, a, a, a, a, a, a, a, a, a]\n"
          + "".join(f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]\n" for i in range(1, 9)) + "entries: []\n")

# (name, registry bytes, where the message points, words in it)
HOSTILE = [
    ("billion laughs", LAUGHS.encode(), ":2:", "aliases expand the document past"),
    ("recursive alias", b"version: 1\nentries: &e [*e]\n", ":2:10: entries[0]", "recursive alias"),
    ("deep nesting", b"version: 1\nentries: " + b"[" * 490 + b"]" * 490 + b"\n", ":2:", "levels of nesting"),
    ("NUL and BEL", b"version: 1\nentries: []\nx: \x00\x07\n", ":3:4:", "U+0000"),
    ("UTF-16 without BOM", "version: 1\nentries: []\n".encode("utf-16-le"), ":1:2:", "UTF-16"),
    ("a list as a name", ENTRY.replace("name: a", "name: []").encode(), ":3:11: entries[0].name", "a string"),
    ("a 400-digit domain", ENTRY.replace("shape: [N]", f"shape: [N], domain: [0, 1{'0' * 400}]").encode(),
     "domain[1]", "(401 characters)"),
    ("a tag on a mapping", ENTRY.replace("inputs:", "supports: !!python/object:os.system {vmap: true}\n    inputs:")
     .encode(), ":6:15: entries[0].supports", "tags are not allowed"),
    ("a tag on a sequence", ENTRY.replace("inputs: [", "inputs: !foo [").encode(), "entries[0].inputs", "'!foo'"),
    ("a fixed size of 10^19", ENTRY.replace("shape: [N]", "shape: [10000000000000000000]").encode(),
     "shape[0]", "a fixed size (an integer from 0 to 2147483647)"),
    ("an owner forging a workflow command", ENTRY.replace('"@a"', '"@a\\n::error::forged"').encode(),
     ":4:12: entries[0].owner", "no spaces, control characters or markup"),
    ("an owner with markup", ENTRY.replace('"@a"', '"<script>"').encode(), "entries[0].owner", "markup"),
    ("a name that is an option", ENTRY.replace("name: a", "name: -rf").encode(), "entries[0].name",
     "not starting with -"),
    ("a 5 MB name", ENTRY.replace("name: a", "name: " + "x" * 5_000_000).encode(), "entries[0].name",
     "at most 200 characters, got 5,000,000"),
]


@pytest.mark.parametrize("command", ["validate", "list", "run"])
@pytest.mark.parametrize("name, raw, where, words", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_registry_is_refused_with_a_located_message(tmp_path, command, name, raw, where, words):
    registry = tmp_path / "registry.yaml"
    registry.write_bytes(raw)
    args = [command, str(registry)] if command == "validate" else [command, "--registry", str(registry)]
    args += ["--out", str(tmp_path / "out"), "--progress", "off"] if command == "run" else []
    start = time.perf_counter()
    result = CliRunner().invoke(cli, args)
    assert time.perf_counter() - start < 5.0  # about 0.3 s here; the bound leaves room for a loaded machine
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    first = result.output.splitlines()[0]
    assert first.startswith(str(registry)) and where in first and words in first, first
    assert len(result.output) < 2_000
    assert not (tmp_path / "out").exists()

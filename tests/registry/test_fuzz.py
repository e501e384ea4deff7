"""1,000 seeded invalid registries: every one is refused with exit 2 and a located message, fast."""

from __future__ import annotations

import re
import time
from collections import Counter

from click.testing import CliRunner

from audit.cli import cli
from tests.registry.fuzz import BASE, _text, mutants

COUNT = 1000
LOCATED = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+):(?P<col>\d+): ")


def _invoke(args):
    start = time.perf_counter()
    result = CliRunner().invoke(cli, args)
    return result, time.perf_counter() - start


def test_the_base_registry_is_valid(tmp_path):
    registry = tmp_path / "registry.yaml"
    registry.write_text(_text(BASE))
    result, _ = _invoke(["validate", str(registry)])
    assert result.exit_code == 0, result.output


def test_every_mutant_is_refused_with_a_located_message(tmp_path):
    seen, slowest = Counter(), 0.0
    for i, (kind, raw) in enumerate(mutants(seed=20261130, count=COUNT)):
        registry = tmp_path / f"r{i}.yaml"
        registry.write_bytes(raw)
        result, seconds = _invoke(["validate", str(registry)])
        slowest = max(slowest, seconds)
        assert result.exit_code == 2, (kind, raw[:300], result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), (kind, result.exception)
        first = result.output.splitlines()[0]
        assert LOCATED.match(first) and first.startswith(str(registry)), (kind, first)
        if i % 25 == 0:  # list and run refuse the same file the same way (run before importing torch)
            for command in (["list", "--registry", str(registry)],
                            ["run", "--registry", str(registry), "--out", str(tmp_path / "out"), "--progress", "off"]):
                other, _ = _invoke(command)
                assert other.exit_code == 2 and other.output.splitlines()[0] == first, (kind, command, other.output)
        seen[kind] += 1
    assert len(seen) == 10 and min(seen.values()) == COUNT // 10
    assert slowest < 2.0, f"slowest validate took {slowest:.2f} s"
    assert not (tmp_path / "out").exists()

"""``audit mutate`` end to end: the reports it writes, the kill-rate gate's exit codes, bad input, the cache."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from audit.cli import cli

pytestmark = pytest.mark.slow  # workers

M = "tests.fixtures.mutation"
#: Cube's x2 scalings (forward, backward) are killed by gradcheck; its backward under no_grad survives, since the
#: entry does not claim double_backward: a kill rate of 2/3.
SELECTED = ["--operator", "scale x2 returned value 0", "--operator", "under torch.no_grad()",
            "--check", "gradcheck", "--check", "gradgradcheck"]


@pytest.fixture(scope="module")
def registry(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mutate-cli")
    path = folder / "registry.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "entries": [
        {"name": "cube", "owner": "@tests", "target": f"{M}:Cube", "inputs": [{"shape": ["N"]}]},
        {"name": "native_only", "owner": "@tests", "target": "torch.nn.functional:softplus", "kind": "callable",
         "inputs": [{"shape": ["N"]}]}]}, sort_keys=False))
    return path


def invoke(*args):
    return CliRunner().invoke(cli, ["mutate", *args], catch_exceptions=False)


@pytest.fixture(scope="module")
def gated(registry):
    out = registry.parent / "out"
    result = invoke("cube", "--registry", str(registry), "--out", str(out), "--min-kill-rate", "0.9",
                    "--cache", "-v", *SELECTED)
    return result, out


def test_an_entry_under_the_kill_rate_fails_the_gate_and_names_its_survivor(gated):
    result, _ = gated
    assert result.exit_code == 1, result.output
    assert "FAIL: 1 entry under --min-kill-rate 90% (cube)" in result.output
    assert "survived m" in result.output and "under torch.no_grad()" in result.output
    assert "claim `supports.double_backward`" in result.output


def test_the_json_and_markdown_reports_are_written(gated):
    _, out = gated
    data = json.loads((out / "mutation.json").read_text())
    assert data["schema"] == 1 and data["counts"] == {"killed": 2, "survived": 1, "equivalent": 0, "errored": 0}
    (entry,) = data["entries"]
    assert entry["name"] == "cube" and entry["kill_rate"] == pytest.approx(2 / 3)
    assert data["first_kills"] == {"gradcheck": 2}
    (survivor,) = [m for m in entry["mutants"] if m["fate"] == "survived"]
    assert survivor["passed"] == ["gradcheck float64 cpu"] and "second order" in json.dumps(survivor["differs"])
    markdown = (out / "mutation.md").read_text()
    assert "| cube | @tests | 67% | 2 | 1 | 0 | 0 |" in markdown and "## Survivors" in markdown
    page = (out / "mutation.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "<td>cube</td>" in page and "under torch.no_grad()" in page
    assert "<script" not in page  # self-contained, nothing to run


def test_a_kill_rate_at_the_threshold_passes_and_the_cache_serves_every_mutant(registry, gated):
    result = invoke("cube", "--registry", str(registry), "--out", str(registry.parent / "again"),
                    "--min-kill-rate", "0.6", "--cache", "-v", *SELECTED)
    assert result.exit_code == 0, result.output
    assert "3 mutants, 3 served by the cache, 0 to run" in result.output
    assert "PASS: every entry at or above --min-kill-rate 60%" in result.output


def test_an_entry_with_nothing_to_mutate_says_so_and_is_not_counted(registry):
    result = invoke("native_only", "--registry", str(registry), "--out", str(registry.parent / "native"),
                    "--check", "gradcheck", "--min-kill-rate", "0.9")
    assert result.exit_code == 0, result.output
    assert "no Python function of this entry to mutate" in result.output and "kill rate n/a" in result.output


def test_an_unknown_entry_is_a_usage_error(registry):
    result = invoke("nothing_like_it", "--registry", str(registry))
    assert result.exit_code == 2 and "matches no entry" in result.output

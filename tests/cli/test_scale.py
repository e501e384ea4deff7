"""CI at scale and upgrades: shard then merge equals one run, the cache, profiles, a simulated upgrade."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from audit.cli import cli
from audit.app.shard import split
from tests.helpers import matrix_without_timings

B = "tests.fixtures.broken"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
DEFAULTS = {"owner": "@team", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}}
ENTRIES = [{"name": name, "target": f"{B}:{target}", **VECTOR}
           for name, target in [("cube", "Cube"), ("sign", "WrongSign"), ("jvp", "CubeJvp"), ("noisy", "Noisy"),
                                ("const", "WrongConstant")]]
CHECKS = ["--check", "forward", "--check", "gradcheck", "--check", "determinism"]
pytestmark = pytest.mark.slow


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_split_is_deterministic_and_balanced():
    names = ["a", "b", "c", "d", "e"]
    assert split(names, 2) == [["a", "c", "e"], ["b", "d"]]
    assert split(names, 2, {"a": 10, "b": 1, "c": 1, "d": 1, "e": 1}) == [["a"], ["b", "c", "d", "e"]]
    assert split(names, 7)[5:] == [[], []]


def test_shards_merge_into_the_unsharded_matrix(write_registry, tmp_path):
    registry = write_registry(ENTRIES, defaults=DEFAULTS)
    full = _run("run", "--registry", registry, "--out", tmp_path / "full", *CHECKS, "--progress", "off")
    assert full.exit_code == 1
    shards = []
    for k in (1, 2, 3):
        out = tmp_path / f"shard{k}"
        result = _run("run", "--registry", registry, "--out", out, *CHECKS, "--progress", "off", "--shard", f"{k}/3",
                      "--durations", tmp_path / "full" / "matrix.json")
        assert result.exit_code in (0, 1), result.output
        shards.append(out / "matrix.json")
    audited = [e["name"] for s in shards for e in json.loads(s.read_text())["entries"]]
    assert sorted(audited) == sorted(e["name"] for e in ENTRIES)  # each entry in exactly one shard
    merged = _run("merge", *shards, "--out", tmp_path / "merged")
    assert merged.exit_code == 1
    assert (matrix_without_timings((tmp_path / "merged" / "matrix.json").read_text())
            == matrix_without_timings((tmp_path / "full" / "matrix.json").read_text()))
    assert sorted(p.name for p in (tmp_path / "merged" / "repro").glob("*.py")) == sorted(
        p.name for p in (tmp_path / "full" / "repro").glob("*.py"))


def test_merge_refuses_a_missing_repeated_or_foreign_shard(write_registry, tmp_path):
    registry = write_registry(ENTRIES[:2], defaults=DEFAULTS)
    for k in (1, 2):
        _run("run", "--registry", registry, "--out", tmp_path / f"s{k}", "--check", "forward", "--progress", "off",
             "--shard", f"{k}/2")
    one, two = tmp_path / "s1" / "matrix.json", tmp_path / "s2" / "matrix.json"
    missing = _run("merge", one, "--out", tmp_path / "m")
    assert missing.exit_code == 2 and "missing shard 2/2" in missing.stderr
    assert not (tmp_path / "m" / "matrix.json").exists()
    assert _run("merge", one, one, "--out", tmp_path / "m").exit_code == 2
    foreign = json.loads(two.read_text())
    foreign["environment"]["torch"] = "9.9.9"
    two.write_text(json.dumps(foreign))
    disagree = _run("merge", one, two, "--out", tmp_path / "m")
    assert disagree.exit_code == 2 and "environment differs" in disagree.stderr and "'torch'" in disagree.stderr


def test_an_empty_shard_still_writes_a_mergeable_matrix(write_registry, tmp_path):
    registry = write_registry(ENTRIES[:1], defaults=DEFAULTS)
    outs = []
    for k in (1, 2):
        outs.append(tmp_path / f"s{k}")
        result = _run("run", "--registry", registry, "--out", outs[-1], "--check", "forward", "--progress", "off",
                      "--shard", f"{k}/2")
        assert result.exit_code == 0, result.output
    assert json.loads((outs[1] / "matrix.json").read_text())["entries"] == []
    assert _run("merge", *(o / "matrix.json" for o in outs), "--out", tmp_path / "m").exit_code == 0


def _package(tmp_path, name: str, factor: int) -> None:
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(f"""
        import torch

        class Scale(torch.autograd.Function):
            @staticmethod
            def forward(x):
                return x * 3

            @staticmethod
            def setup_context(ctx, inputs, output):
                pass

            @staticmethod
            def backward(ctx, grad):
                return grad * {factor}
        """))


def test_cache_reuses_unchanged_cells_and_reaudits_only_a_changed_target(write_registry, tmp_path):
    _package(tmp_path, "cache_ops_a", 3)
    _package(tmp_path, "cache_ops_b", 3)
    entries = [{"name": n, "target": f"cache_ops_{n}:Scale", **VECTOR} for n in ("a", "b")]
    registry = write_registry(entries, defaults=DEFAULTS)
    args = ["run", "--registry", registry, "--out", tmp_path / "out", *CHECKS, "--progress", "off",
            "--profile", "premerge", "--cache-dir", tmp_path / "cache"]
    cold = _run(*args)
    assert cold.exit_code == 0 and "cache: 0 of 6 cells reused" in cold.stderr
    first = matrix_without_timings((tmp_path / "out" / "matrix.json").read_text())
    warm = _run(*args)
    assert warm.exit_code == 0 and "cache: 6 of 6 cells reused" in warm.stderr and "0 computed" in warm.stderr
    assert matrix_without_timings((tmp_path / "out" / "matrix.json").read_text()) == first
    _package(tmp_path, "cache_ops_b", 2)  # the pull request breaks b's backward
    red = _run(*args)
    assert red.exit_code == 1 and "cache: 3 of 6 cells reused" in red.stderr and "3 computed" in red.stderr
    assert "b gradcheck FAIL" in red.stdout
    assert _run(*args, "--no-cache").stderr.count("cache:") == 0


def test_cache_never_hides_an_error(write_registry, tmp_path):
    entries = [{"name": "gone", "target": "no_such_module_here:Thing", **VECTOR},
               {"name": "cube", "target": f"{B}:Cube", **VECTOR}]
    registry = write_registry(entries, defaults=DEFAULTS)
    args = ["run", "--registry", registry, "--out", tmp_path / "out", "--check", "forward", "--progress", "off",
            "--cache", "--cache-dir", tmp_path / "cache"]
    assert _run(*args).exit_code == 1
    again = _run(*args)
    assert again.exit_code == 1 and "cache: 1 of 2 cells reused" in again.stderr
    assert "gone forward ERROR" in again.stdout


def test_profiles_set_examples_and_flags_win(write_registry, tmp_path):
    registry = write_registry([ENTRIES[0]], defaults=DEFAULTS)
    text = registry.read_text() + "profiles:\n  premerge: {examples: 3, cache: false}\n  nightly: {examples: 7}\n"
    registry.write_text(text)

    def examples(*extra):
        result = _run("run", "--registry", registry, "--out", tmp_path / "o", "--check", "forward",
                      "--progress", "off", *extra)
        assert result.exit_code == 0, result.output + result.stderr
        matrix = json.loads((tmp_path / "o" / "matrix.json").read_text())
        return matrix["environment"]["examples"], "cache:" in result.stderr

    assert examples() == (20, False)
    assert examples("--profile", "premerge") == (3, False)
    assert examples("--profile", "nightly") == (7, False)
    assert examples("--profile", "premerge", "--examples", "4") == (4, False)
    unknown = _run("run", "--registry", registry, "--profile", "weekly", "--progress", "off")
    assert unknown.exit_code == 2 and "known: intake, nightly, premerge, upgrade" in unknown.stderr


def test_simulated_upgrade_shows_the_regression(write_registry, tmp_path, monkeypatch):
    """Run under the 'old' environment, then the 'new' one (the same code), and diff the matrices."""
    registry = write_registry([{"name": "doubler", "target": "tests.fixtures.upgrade:Doubler", **VECTOR}],
                              defaults=DEFAULTS)
    old = _run("run", "--registry", registry, "--out", tmp_path / "old", *CHECKS, "--progress", "off")
    assert old.exit_code == 0
    monkeypatch.setenv("AUDIT_TEST_ENVIRONMENT", "broken")
    new = _run("run", "--registry", registry, "--out", tmp_path / "new", *CHECKS, "--progress", "off")
    assert new.exit_code == 1
    result = _run("diff", tmp_path / "old" / "matrix.json", tmp_path / "new" / "matrix.json")
    assert result.exit_code == 1
    assert result.stdout.startswith("audit diff: REGRESSION (1 regression)")
    assert "doubler gradcheck (float64, cpu): pass -> fail (same code and environment" in result.stdout

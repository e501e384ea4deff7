"""New-model intake: the runtime and static scans, the comparison, stubs and init."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from click.testing import CliRunner

from audit.cli import cli
from audit.registry.load import load_registry
from audit.scan import codeowners, stubs
from audit.scan.compare import compare
from audit.scan.findings import Call, Finding
from audit.scan.static import scan_sources
from audit.scan.tracing import scan_model
from examples.intake import build_block, build_mlp
from tests.conftest import ROOT

UNREGISTERED = {"intake::rms_scale", "examples.intake:_GeluTanh", "examples.intake:_ScaledAdd",
                "examples.intake:_RowNorm"}


def _run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def test_runtime_scan_finds_exactly_the_unregistered_code():
    registry = load_registry(ROOT / "registry.yaml")
    result = compare(scan_model(*build_block()), registry)
    assert {f.target for f in result.unregistered} == UNREGISTERED
    found = {f.target: f for f in result.unregistered}
    assert "in scaled_residual" in found["examples.intake:_ScaledAdd"].sites[0]  # reached through a wrapper
    assert not found["examples.intake:_RowNorm"].grad  # used only under no_grad, found all the same
    assert found["examples.intake:_GeluTanh"].calls[0].args[0][1] == (2, 5, 16)  # inside a submodule
    mlp = compare(scan_model(*build_mlp()), registry)
    assert not mlp.unregistered and {name for _, name in mlp.used} == {"softplus", "logsumexp"}


def test_scan_command_gates_and_speaks_json(monkeypatch):
    monkeypatch.chdir(ROOT)
    assert _run("scan", "examples.intake:build_mlp").exit_code == 0
    result = _run("scan", "examples.intake:build_block", "--format", "json")
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert {f["target"] for f in data["used_but_unregistered"]} == UNREGISTERED
    assert data["verdict"] == "fail" and "logsumexp" in data["registered_but_not_seen"]
    assert data["used_but_unregistered"][0]["signatures"][0].startswith("(float32[")


def test_static_scan_follows_aliases_reexports_nesting_and_cpp():
    found = {(f.kind, f.target) for f in scan_sources([ROOT / "tests" / "fixtures" / "source_tree"])}
    functions = {t for k, t in found if k == "function"}
    assert functions == {"pkg.ops:Cubic", "pkg.ops:Square", "pkg.ops:Outer.Inner", "pkg.ops:make.<locals>.Local",
                         "pkg.more:Derived", "pkg.more:ViaModule"}
    assert {t for k, t in found if k == "op"} == {"pkg::triple", "pkg::double", "pkg::half", "pkg::fused",
                                                 "pkg::fused_backward"}
    assert ("kernel (CUDA)", "pkg::fused") in found and ("autograd registration", "pkg::double") in found


def test_static_scan_against_the_registry(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = _run("scan", "--source", "examples", "--format", "json")
    data = json.loads(result.output)
    # softsign_backward is the C++ example's helper op: defined with TORCH_LIBRARY, so the scan lists it.
    assert result.exit_code == 1
    assert {f["target"] for f in data["used_but_unregistered"]} == UNREGISTERED | {"examples_native::softsign_backward"}
    assert {f["entry"] for f in data["registered_and_used"]} == {"logsumexp", "sincos", "softmax", "softplus", "spike",
                                                                 "softsign_native", "dropout", "complex_filter"}
    assert any(n["kind"] == "kernel (CUDA)" for n in data["notes"])


def test_write_appends_stubs_keeping_comments_and_the_placeholder_owner_is_refused(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    shutil.copy(ROOT / "registry.yaml", registry)
    before = registry.read_text()
    monkeypatch.chdir(ROOT)
    result = _run("scan", "examples.intake:build_block", "--registry", registry, "--write")
    assert result.exit_code == 1 and "wrote 4 stub(s)" in result.output
    text = registry.read_text()
    assert text.startswith(before.rstrip("\n"))  # every existing line, comment and entry kept, in order
    assert "# Added by `audit scan --write`" in text
    refused = _run("validate", registry)
    assert refused.exit_code == 2 and "a placeholder `audit scan --write` left" in refused.output
    registry.write_text(text.replace(repr(stubs.PLACEHOLDER), "'@intake'"))
    loaded = load_registry(registry)
    stub = loaded.entry("scaled_add")
    assert stub.kind == "function" and stub.target == "examples.intake:_ScaledAdd"
    assert [getattr(s, "value", None) for s in stub.inputs][2] == 0.5
    assert stub.supports.dtypes == ("float64", "float32") and loaded.entry("rms_scale").load == ("examples.intake",)


@pytest.mark.slow
def test_written_stubs_audit_green(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text("version: 1\nentries: []\n")
    monkeypatch.chdir(ROOT)
    _run("scan", "examples.intake:build_block", "--registry", registry, "--write")
    registry.write_text(registry.read_text().replace(repr(stubs.PLACEHOLDER), "'@intake'"))
    result = _run("run", "--registry", registry, "--out", tmp_path / "out", "--progress", "off", "-j", "2",
                  "--examples", "10")
    assert result.exit_code == 0, result.output


def test_stub_inference_makes_varying_sizes_symbolic():
    def call(b, n):
        return Call((("tensor", (b, n), "float32", (n, 1), "cpu", True, -1.5, 2.0), ("value", "3", 3)))

    finding = Finding("function", "pkg.mod:Fn", calls=[call(2, 8), call(4, 8), call(3, 8)])
    inputs, dims = stubs.infer(finding)
    assert inputs == [{"shape": ["B", 8], "domain": [-1.5, 2.0]}, {"value": 3}] and dims == {"B": [2, 4]}


def test_codeowners_last_match_wins(tmp_path):
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "CODEOWNERS").write_text("* @everyone\n/kernels/ @kernel-team\n*.cu @cuda-team\n")
    rules = codeowners.load(tmp_path)
    assert codeowners.owners(rules, "kernels/fused.py") == ["@kernel-team"]
    assert codeowners.owners(rules, "kernels/fused.cu") == ["@cuda-team"]
    assert codeowners.owners(rules, "models/net.py") == ["@everyone"]
    source = tmp_path / "kernels" / "fn.py"
    made = stubs.stubs([Finding("function", "kernels.fn:Fn", str(source),
                                calls=[Call((("tensor", (2,), "float32", (1,), "cpu", True, 0.0, 1.0),))])],
                       None, root=tmp_path, load=[])
    assert made[0]["owner"] == "@kernel-team"


def test_init_scaffolds_once(tmp_path):
    assert _run("init", "--dir", tmp_path).exit_code == 0
    for name in ("registry.yaml", "checks/README.md", "reports/.gitkeep", ".github/workflows/autograd-audit.yml"):
        assert (tmp_path / name).exists(), name
    assert load_registry(tmp_path / "registry.yaml").entries == ()
    steps = yaml.safe_load((tmp_path / ".github/workflows/autograd-audit.yml").read_text())["jobs"]["audit"]["steps"]
    assert any(s.get("uses", "").startswith("OWNER/autograd-audit@") for s in steps)  # the composite action
    assert any("pip install -e ." in s.get("run", "") for s in steps)  # the user's own project
    assert not any("pip install autograd-audit" in s.get("run", "") for s in steps)  # not published
    modeline = (tmp_path / "registry.yaml").read_text().splitlines()[0]
    assert modeline == "# yaml-language-server: $schema=.autograd-audit/registry.schema.json"
    relative = modeline.split("$schema=")[1]  # resolved against the registry's folder, on every clone
    assert json.loads((tmp_path / relative).read_text())["title"].startswith("autograd-audit registry")
    assert str(ROOT) not in (tmp_path / "registry.yaml").read_text()
    again = _run("init", "--dir", tmp_path)
    assert again.exit_code == 2 and "exists: nothing written" in again.output


def test_a_function_made_inside_a_factory_gets_a_commented_stub_never_an_unimportable_target(tmp_path, monkeypatch):
    registry = tmp_path / "registry.yaml"
    registry.write_text("version: 1\nentries: []\n")
    monkeypatch.chdir(ROOT)
    result = _run("scan", "tests.fixtures.local_function:build", "--registry", registry, "--write")
    assert result.exit_code == 1 and "1 made inside a factory" in result.output
    text = registry.read_text()
    assert "is made inside tests.fixtures.local_function.make_scale() and cannot be imported" in text
    assert "#     def scale_fn_call(*tensors):" in text and "#     target: YOUR_MODULE:scale_fn_call" in text
    assert "<locals>" not in "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))
    assert _run("validate", registry).exit_code == 0  # nothing unimportable was added


@pytest.mark.parametrize("pattern, path, owned", [
    ("docs/*", "docs/a.md", True), ("docs/*", "docs/a/b.md", False), ("/build/logs", "build/logs/x.py", True),
    ("**/logs", "a/logs/x", True), ("docs/**/*.md", "docs/a.md", True), ("*.js", "a/b/c.js", True),
    ("apps/", "x/apps/y.py", True), ("/apps/", "x/apps/y.py", False), ("/docs/*", "docs/a/b.md", False)])
def test_codeowners_patterns_match_as_github_matches_them(pattern, path, owned):
    from audit.scan.codeowners import matches

    assert matches(pattern, path) is owned

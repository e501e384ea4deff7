"""CI integration: the pytest plugin, the Python API, --format github, and the GitHub files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from audit.api import AuditAssertionError, audit
from audit.cli import cli
from tests.conftest import ROOT
from tests.fixtures.broken import Cube, WrongSign, cube_reference
from tests.helpers import plugin_args

B = "tests.fixtures.broken"
VECTOR = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 4]}}
REGISTRY = {"version": 1, "defaults": {"owner": "@ml-kernels", "supports": {"dtypes": ["float64"], "devices": ["cpu"]}},
            "entries": [{"name": "cube", "target": f"{B}:Cube", **VECTOR},
                        {"name": "broken", "target": f"{B}:WrongSign", **VECTOR}]}
#: A pytest subprocess's arguments that audit ./registry.yaml, the plugin loaded however audit is installed.
AUDITED = (*plugin_args(), "--audit-registry", "registry.yaml", "-p", "no:cacheprovider")


@pytest.mark.slow
def test_pytest_plugin_turns_entries_into_items_and_fails_on_the_planted_bug(pytester):
    pytester.makefile(".yaml", registry=yaml.safe_dump(REGISTRY, sort_keys=False))
    result = pytester.runpytest_subprocess(*AUDITED,
                                           "--audit-examples", "5", "-k", "gradcheck and not gradgradcheck")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["collected * items / * deselected / 2 selected"])
    result.stdout.fnmatch_lines(["*broken::gradcheck*", "broken (owner @ml-kernels, registry line *):",
                                 "  gradcheck FAIL (float64, cpu): Jacobian mismatch*",
                                 "    repro: audit repro broken gradcheck --dtype float64 --device cpu --seed 0"])
    assert "Traceback" not in result.stdout.str()


@pytest.mark.slow
def test_pytest_plugin_reports_an_unclaimed_check_that_does_not_hold_as_xfail(pytester):
    """cube does not claim double_backward, and its backward is not differentiable: not a PASSED."""
    unclaimed = {**REGISTRY, "entries": [{"name": "once", "target": f"{B}:OnceDifferentiable", **VECTOR}]}
    pytester.makefile(".yaml", registry=yaml.safe_dump(unclaimed, sort_keys=False))
    result = pytester.runpytest_subprocess(*AUDITED, "-rx",
                                           "--audit-examples", "5", "-k", "gradgradcheck")
    result.assert_outcomes(xfailed=1)
    result.stdout.fnmatch_lines(["*once::gradgradcheck*unsupported*once_differentiable*"])


def test_pytest_plugin_does_nothing_without_its_option(pytester):
    pytester.makepyfile(test_plain="def test_one():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_pytest_plugin_reports_a_broken_registry_as_a_collection_error(pytester):
    pytester.makefile(".yaml", registry="version: 1\nentries: [{name: x}]\n")
    result = pytester.runpytest_subprocess(*AUDITED)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*registry.yaml:2:11: entries?0?: missing required key 'inputs'*",
                                 "*registry.yaml:2:11: entries?0?: missing required key 'owner'*",
                                 "*registry.yaml:2:11: entries?0?: missing required key 'target'",
                                 "3 problem(s) in the registry; nothing was audited"])  # all at once
    assert "Traceback" not in result.stdout.str() and "pytest_plugin.py" not in result.stdout.str()


def test_python_api_passes_the_twin_and_raises_with_the_shrunk_case():
    good = audit(Cube, inputs=VECTOR["inputs"], dims=VECTOR["dims"], reference=cube_reference,
                 supports={"dtypes": ["float64"], "vmap": True}, checks=["gradcheck", "vmap"], examples=5)
    assert good.ok and good.status("vmap") is good.status("gradcheck")
    with pytest.raises(AuditAssertionError) as raised:
        audit(WrongSign, inputs=VECTOR["inputs"], dims=VECTOR["dims"], checks=["gradcheck"], examples=5).assert_ok()
    text = str(raised.value)
    assert "WrongSign: 1 cell(s) failed (seed 0; the same call replays)" in text
    assert "gradcheck FAIL (float64, cpu): Jacobian mismatch" in text and "shrunk case: {'dims': {'N': 1}" in text


def test_python_api_takes_an_op_and_validates_like_the_registry():
    from tests.fixtures.transforms import scale

    result = audit(scale, inputs=[{"shape": ["B"]}], dims={"B": [1, 3]}, checks=["opcheck"], examples=3)
    assert result.name == "audit_transforms.scale" and result.ok
    from audit.core.errors import RegistryError

    with pytest.raises(RegistryError, match="domain"):
        audit(Cube, inputs=[{"shape": ["N"], "domain": [2, 1]}], dims=VECTOR["dims"], checks=["forward"])


@pytest.mark.slow
def test_run_writes_every_report_and_github_format_annotates_and_summarises(write_registry, tmp_path, monkeypatch):
    registry = write_registry(REGISTRY["entries"], defaults=REGISTRY["defaults"])
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    out = tmp_path / "out"
    result = CliRunner().invoke(cli, ["run", "--registry", str(registry), "--out", str(out), "--check", "gradcheck",
                                      "--progress", "off", "--format", "github"])
    assert result.exit_code == 1
    assert result.stdout.startswith(f"::error file={registry},line=")
    assert "broken gradcheck FAIL" in result.output and "validation matrix" in result.output
    assert summary.read_text().startswith("## ❌ autograd-audit: FAIL")
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml", "matrix.html", "matrix.json", "matrix.md", "repro"]


def test_github_files_have_the_keys_github_requires():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "audit.yml").read_text())
    assert workflow.get("on", workflow.get(True))  # PyYAML reads the key `on` as True
    for name, job in workflow["jobs"].items():
        assert "runs-on" in job and job["steps"], name
        assert all("uses" in step or "run" in step for step in job["steps"]), name
    assert workflow["jobs"]["audit"]["strategy"]["matrix"]["shard"] == [1, 2]
    gate = json.dumps(workflow["jobs"]["gate"])
    assert "audit merge" in gate and "baseline.json" in gate
    assert "self-hosted" in workflow["jobs"]["gpu"]["runs-on"] and workflow["jobs"]["gpu"]["if"]
    second = workflow["jobs"]["tests-second-stack"]["steps"]
    assert {"python-version": "3.12"} in [step.get("with") for step in second]
    assert "bash .ci/second-stack" in [step.get("run") for step in second]
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    assert action["name"] and action["description"] and action["runs"]["using"] == "composite"
    assert {"registry", "profile", "args"} <= set(action["inputs"])
    assert {"verdict", "matrix", "html", "junit"} <= set(action["outputs"])
    assert all("shell" in step for step in action["runs"]["steps"] if "run" in step)
    hooks = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert hooks["audit-validate"]["entry"] == "audit validate" and "pre-push" in hooks["audit-run"]["stages"]
    assert all({"id", "name", "entry", "language"} <= set(h) for h in hooks.values())


def test_readme_names_every_command():
    readme = (ROOT / "README.md").read_text()
    for command in ("audit run", "audit validate", "audit list", "audit repro", "audit diff", "audit merge",
                    "audit report", "--audit-registry", "audit.api"):
        assert command in readme, command
    assert Path(ROOT / "action.yml").exists()

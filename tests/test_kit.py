"""The replay kit holds the checks and their scripts to one spelling of each property.

- the kit imports nothing but torch and the standard library, so a script can carry its source;
- every built-in check has a property, and the property and its helpers name nothing a script lacks;
- no module under ``audit/`` keeps code in a string literal (the templates the kit replaced);
- on a case where a check and its script once drifted apart, the script finds what the check finds.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit import kit
from audit.checks import builtin
from audit.engine.script import kit_source
from tests.helpers import ROOT, entry, observe

AUDIT = ROOT / "audit"
#: The most lines of Python one string literal under audit/ may hold, and all of them together.
LONGEST, ALL = 15, 100


def test_the_kit_imports_only_torch_and_the_standard_library():
    allowed = {"__future__", "math", "sys", "torch"}
    tree = ast.parse(inspect.getsource(kit))
    found = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for alias in node.names}
    found |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert found <= allowed, f"the kit imports {sorted(found - allowed)}: a replay script could not carry it"


def test_every_builtin_check_has_a_property():
    missing = [name for name, check in builtin().items() if check.replay is None]
    assert not missing, f"checks without a replayable property: {missing}"


@pytest.mark.parametrize("name", sorted(builtin()))
def test_a_property_names_only_what_its_script_defines(name):
    """Each global name the property and its helpers read is defined in the script: the kit, the embedded
    functions, or a builtin. A name from the check's module (an audit helper) would raise NameError in the
    script, only on the path that reads it."""
    check = builtin()[name]
    functions = [f for f in (check.replay, check.model_replay, *check.replay_helpers) if f is not None]
    defined = _top_level_names(kit_source()) | {f.__name__ for f in functions} | set(dir(builtins))
    for function in functions:
        unknown = _free_names(inspect.getsource(function)) - defined
        assert not unknown, f"{name}: {function.__name__} reads {sorted(unknown)}, which its replay script lacks"


def test_no_module_keeps_code_in_a_string():
    found = {}
    for path in sorted(AUDIT.rglob("*.py")):
        for node, lines in _code_literals(path):
            found[f"{path.relative_to(ROOT)}:{node.lineno}"] = lines
    too_long = {where: n for where, n in found.items() if n > LONGEST}
    assert not too_long, f"string literals holding more than {LONGEST} lines of Python: {too_long}"
    assert sum(found.values()) < ALL, f"{sum(found.values())} lines of Python in string literals: {found}"


@pytest.mark.slow
def test_a_float32_output_under_a_float64_input_fails_in_the_cell_and_in_its_script(tmp_path):
    """The forward case the check and its script once disagreed on: a Function computing in float32 under a
    float64 input. The cell fails, and the script it writes fails too, printing the cell's message."""
    outcome = observe(entry(tmp_path, target="tests.fixtures.layout:Float32Output", inputs=[{"shape": ["N"]}],
                            dims={"N": [1, 4]}, reference="tests.fixtures.broken:cube_reference"), "forward")
    assert outcome.verdict.value == "violated", outcome.message
    script = tmp_path / "replay.py"
    script.write_text(outcome.script)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert outcome.message.split("; on ")[0] in done.stdout


def _top_level_names(source: str) -> set[str]:
    """The names a module's top level binds: functions, classes, assignments and imports."""
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _free_names(source: str) -> set[str]:
    """Names a function reads that it does not bind anywhere inside itself (a conservative approximation of its
    globals: a name bound in any nested scope counts as bound)."""
    tree = ast.parse(textwrap.dedent(source))
    bound, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return read - bound


def _code_literals(path: Path):
    """Each string literal of ``path`` that is not a docstring and parses as Python of 3 lines or more, with its
    line count."""
    tree = ast.parse(path.read_text(), str(path))
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            lines = node.value.strip("\n").count("\n") + 1
            if lines >= 3 and _parses(node.value):
                yield node, lines


def _parses(text: str) -> bool:
    try:
        ast.parse(textwrap.dedent(text))
    except SyntaxError:
        return False
    return True

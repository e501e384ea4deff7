"""The replay kit holds the checks and their scripts to one spelling of each property.

- the kit imports nothing but torch and the standard library, so a script can carry its source;
- every built-in check has a property (``tests/checks/test_scripts_compile.py``: it names nothing its script lacks);
- no module under ``audit/`` keeps code in a string literal (the templates the kit replaced);
- on a case where a check and its script once drifted apart, the script finds what the check finds.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from audit.kit import MODULES
from audit.kit import compiled
from audit.checks import builtin
from tests.helpers import ROOT, entry, observe

AUDIT = ROOT / "audit"
#: The most lines of Python one string literal under audit/ may hold, and all of them together.
LONGEST, ALL = 15, 100


def _kit_modules():
    return {name: importlib.import_module(f"audit.kit.{name}") for name in MODULES}


@pytest.mark.parametrize("name", MODULES)
def test_a_kit_module_imports_only_torch_the_standard_library_and_the_kit(name):
    allowed = set(sys.stdlib_module_names) | {"__future__", "torch"}
    tree = ast.parse(inspect.getsource(_kit_modules()[name]))
    found = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    found |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
    outside = {module for module in found
               if module.split(".")[0] not in allowed and not module.startswith("audit.kit.")}
    assert not outside, f"the kit imports {sorted(outside)}: a replay script could not carry it"


def test_every_kit_module_is_carried_and_no_name_is_defined_twice():
    """A script joins the modules into one: every module must be in MODULES, and a name defined in two of them
    would be one definition there."""
    files = {path.stem for path in (AUDIT / "kit").glob("*.py")} - {"__init__"}
    assert files == set(MODULES)
    defined = [name for module in _kit_modules().values() for stmt in ast.parse(inspect.getsource(module)).body
               for name in _bound(stmt)]
    assert sorted(n for n in set(defined) if defined.count(n) > 1) == []


def _bound(stmt) -> set[str]:
    if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
        return {stmt.name}
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    return {node.id for target in targets for node in ast.walk(target) if isinstance(node, ast.Name)}


def test_every_builtin_check_has_a_property():
    missing = [name for name, check in builtin().items() if check.replay is None and check.model_replay is None]
    assert not missing, f"checks without a replayable property: {missing}"


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


def test_a_dynamo_message_that_lost_the_users_line_gets_it_from_the_graph_break_record():
    """torch 2.11's Dynamo names the user's line only in its stack record, not in the explanation the kit reads
    on 2.13: the site is the innermost frame outside torch either way."""
    import traceback

    import torch

    exc = RuntimeError("Data-dependent branching\n  Explanation: Detected data-dependent branching.")
    exc.real_stack = traceback.StackSummary.from_list([  # type: ignore[attr-defined]
        ("/src/mine.py", 76, "forward", "if x.sum() > 0:"),
        (str(Path(torch.__file__).parent / "_functorch" / "autograd_function.py"), 880, "inner", "outs = f()")])
    assert compiled.dynamo_explained(exc) == (
        "Data-dependent branching; Explanation: Detected data-dependent branching. "
        '(File "/src/mine.py", line 76, in forward, code: if x.sum() > 0:)')
    assert compiled.dynamo_user_site(RuntimeError("no record")) == ""


def test_reseed_gives_torch_s_stream_for_the_seed_without_manual_seed(monkeypatch):
    """A guarded call starts from the seed's stream (a stochastic target draws the same at every call), as after
    torch.manual_seed, which the kit no longer calls per call (each queued CUDA's lazy seed with a stack trace)."""
    import torch

    from audit.kit.calls import guarded, reseed

    torch.manual_seed(5)
    expected = torch.rand(4)
    torch.rand(100)  # the stream moved on
    reseed(5)
    assert torch.equal(torch.rand(4), expected)
    monkeypatch.setattr(torch, "manual_seed", lambda seed: pytest.fail("a guarded call called torch.manual_seed"))
    noisy = guarded(lambda x: x + torch.rand(3), seed=5)
    assert torch.equal(noisy(torch.zeros(3)), noisy(torch.zeros(3)))
    assert torch.equal(noisy(torch.zeros(3)), expected[:3])


def _rows(n: int):
    import torch

    return torch.arange(float(n * 2)).reshape(n, 2)


def test_a_batch_is_made_of_each_form_make_batch_gives_its_inputs_in():
    """A tensor is the model's one argument (never one argument a row), a tuple or list its positional arguments, a
    dict its keyword arguments; the model is called on each as it expects."""
    import torch

    from audit.kit.models import Batch, as_batch

    x, y, targets = _rows(4), _rows(4) + 1, torch.zeros(4)
    assert as_batch((x, targets)).args == (x,)
    assert as_batch([(x, y), targets]).args == (x, y) and as_batch(([x, y], targets)).args == (x, y)
    keyword = as_batch(({"features": x, "scale": 2.0}, targets))
    assert keyword.args == () and keyword.kwargs == {"features": x, "scale": 2.0} and keyword.targets is targets
    assert Batch((x, y)).forward(lambda a, b: a - b).eq(-1).all()
    assert keyword.forward(lambda *, features, scale: features * scale).equal(x * 2)
    assert as_batch((x, targets)).forward(lambda a: a.shape) == (4, 2)


@pytest.mark.parametrize("made, words", [
    ({"features": 1, "labels": 2}, "got a dict with keys 'features', 'labels'"),
    ((1, 2, 3), "got a tuple of 3"),
    (None, "got NoneType"),
    (("text", None), "got (str, NoneType)"),
    (({0: 1}, None), "got (a dict with keys 0, NoneType)"),
])
def test_a_batch_in_another_form_says_what_was_expected_and_what_came_back(made, words):
    from audit.kit.models import BatchError, as_batch

    with pytest.raises(BatchError) as caught:
        as_batch(made)
    assert str(caught.value).startswith("make_batch(size, seed) must return (inputs, targets), inputs a tensor")
    assert words in str(caught.value), str(caught.value)


@pytest.mark.parametrize("form", ["tensor", "tuple", "dict"])
def test_micro_batches_split_every_tensor_along_dim_0_and_repeat_the_rest(form):
    import torch

    from audit.kit.models import as_batch, micro_batches

    x, shift, targets = _rows(5), _rows(5) * 10, torch.arange(5.0)
    inputs = {"tensor": x, "tuple": (x, shift, "mean", torch.tensor(3.0)),
              "dict": {"x": x, "shift": shift, "reduce": "mean", "temperature": torch.tensor(3.0)}}[form]
    parts = micro_batches(as_batch((inputs, targets)), 2)
    assert [p.rows() for p in parts] == [3, 2]
    assert torch.equal(torch.cat([p.targets for p in parts]), targets)
    first = parts[0].args[0] if form != "dict" else parts[0].kwargs["x"]
    assert torch.equal(first, x[:3])
    if form == "tuple":
        assert torch.equal(torch.cat([p.args[1] for p in parts]), shift)
        assert [p.args[2:] for p in parts] == [("mean", torch.tensor(3.0))] * 2
    if form == "dict":
        assert all(list(p.kwargs) == ["x", "shift", "reduce", "temperature"] for p in parts)
        assert torch.equal(torch.cat([p.kwargs["shift"] for p in parts]), shift)
        assert [(p.kwargs["reduce"], float(p.kwargs["temperature"])) for p in parts] == [("mean", 3.0)] * 2


def test_a_model_batch_is_placed_in_the_cell_s_dtype_whatever_its_form():
    import torch

    from audit.kit.models import model_batch

    def make_batch(size, seed):
        return {"x": torch.ones(size, 2), "ids": torch.arange(size)}, torch.zeros(size)

    batch = model_batch(make_batch, 3, 0, torch.float64, "cpu")
    assert batch.kwargs["x"].dtype == torch.float64 and batch.kwargs["ids"].dtype == torch.int64
    assert batch.targets.dtype == torch.float64 and batch.rows() == 3

"""Plausible mistakes in every Python object a registry names (targets, references, proxies, module and model
factories, make_batch, loss), each refused saying what was expected and what came back: an error when the target
loads (every cell an error with that message) or an error cell where it only shows while running; never "the audit
itself failed", never a traceback, and every other entry's results stand."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from audit.results.outcome import ERRORED, HELD, SKIPPED, VIOLATED
from audit.runtime.target import TargetError, resolve
from tests.helpers import ROOT, entry, observe

M = "tests.fixtures.mistakes"
VECTOR = {"inputs": [{"shape": ["N"]}]}
ROWS = {"inputs": [{"shape": ["B", 3]}]}

#: (id, registry keys, what the load says) for mistakes refused when the target loads.
AT_LOAD = [
    ("target-not-callable", {"kind": "callable", "target": f"{M}:NOT_CALLABLE", **VECTOR},
     "is not callable (got float)"),
    ("function-kind-plain-function", {"kind": "function", "target": f"{M}:cube", **VECTOR},
     "is not a torch.autograd.Function subclass (got function); use kind: callable"),
    ("target-arity", {"kind": "callable", "target": f"{M}:two_arguments", **VECTOR},
     "two_arguments(x, y) does not take the registry's 1 input (inputs:, one positional argument each): missing a "
     "required argument: 'y'"),
    ("function-arity", {"kind": "function", "target": f"{M}:Cube", "inputs": [{"shape": ["N"]}, {"shape": ["N"]}]},
     "Cube(x) does not take the registry's 2 inputs"),
    ("target-missing", {"kind": "callable", "target": f"{M}:no_such_function", **VECTOR},
     f"module '{M}' has no attribute 'no_such_function'"),
    ("target-module-missing", {"kind": "callable", "target": "no_such_module_here:f", **VECTOR},
     "cannot import module 'no_such_module_here': ModuleNotFoundError"),
    ("op-not-registered", {"kind": "op", "target": "no_such_namespace::f", **VECTOR},
     "no operator 'no_such_namespace::f' is registered"),
    ("reference-not-callable", {"target": f"{M}:Cube", "reference": f"{M}:NOT_CALLABLE", **VECTOR},
     "reference: tests.fixtures.mistakes:NOT_CALLABLE is not callable (got float)"),
    ("reference-arity", {"target": f"{M}:Cube", "reference": f"{M}:reference_no_arguments", **VECTOR},
     "reference: tests.fixtures.mistakes:reference_no_arguments() does not take the registry's 1 input"),
    ("reference-missing", {"target": f"{M}:Cube", "reference": f"{M}:no_such_reference", **VECTOR},
     "has no attribute 'no_such_reference'"),
    ("proxy-not-callable", {"target": f"{M}:Cube", "proxy": f"{M}:NOT_CALLABLE", **VECTOR},
     "proxy: tests.fixtures.mistakes:NOT_CALLABLE is not callable (got float)"),
    ("module-factory-takes-an-argument", {"kind": "module", "target": f"{M}:factory_needs_argument", **ROWS},
     "the module factory tests.fixtures.mistakes:factory_needs_argument raised TypeError: factory_needs_argument() "
     "missing 1 required positional argument: 'width' (kind module: a function called with no arguments that "
     "returns an nn.Module)"),
    ("module-factory-returns-a-function", {"kind": "module", "target": f"{M}:factory_returns_function", **ROWS},
     "returned FunctionMeta: expected an nn.Module"),
    ("module-factory-returns-none", {"kind": "module", "target": f"{M}:factory_returns_none", **ROWS},
     "returned NoneType: expected an nn.Module"),
    ("module-factory-raises", {"kind": "module", "target": f"{M}:factory_raises", **ROWS},
     "raised RuntimeError: cannot build (at "),
    ("module-factory-not-callable", {"kind": "module", "target": f"{M}:NOT_CALLABLE", **ROWS},
     "is not a factory (got float)"),
    ("model-factory-pair", {"kind": "model", "target": f"{M}:model_pair"},
     "returned a tuple of 2 (Sequential, function): expected (model, make_batch, loss) with model an nn.Module"),
    ("model-factory-not-a-module", {"kind": "model", "target": f"{M}:model_not_a_module"},
     "returned a tuple of 3 (function, function, function): expected (model, make_batch, loss)"),
]

#: (id, registry keys, check, dtype, verdict, what the cell says) for mistakes that show while running.
RUNNING = [
    ("reference-returns-a-pair", {"target": f"{M}:Cube", "reference": f"{M}:reference_pair", **VECTOR}, "gradcheck",
     "float64", ERRORED, "reference tests.fixtures.mistakes:reference_pair returns 2 tensors ([1], [1]) where the "
     "target returns 1 tensor ([1])"),
    ("reference-returns-a-pair-forward", {"target": f"{M}:Cube", "reference": f"{M}:reference_pair", **VECTOR},
     "forward", "float64", ERRORED, "where the target returns 1 tensor"),
    ("reference-wrong-shape", {"target": f"{M}:Cube", "reference": f"{M}:reference_wrong_shape", **VECTOR},
     "forward", "float64", ERRORED, "returns 1 tensor ([1, 1]) where the target returns 1 tensor ([1])"),
    ("reference-returns-none", {"target": f"{M}:Cube", "reference": f"{M}:reference_none", **VECTOR}, "gradcheck",
     "float64", ERRORED, "reference tests.fixtures.mistakes:reference_none returns NoneType"),
    ("reference-raises-in-float32", {"target": f"{M}:Cube", "reference": f"{M}:reference_raises_in_float32",
                                     **VECTOR}, "dtype", "float32", HELD, ""),
    ("proxy-returns-a-pair", {"target": f"{M}:Cube", "proxy": f"{M}:proxy_pair", **VECTOR}, "gradcheck", "float64",
     ERRORED, "proxy tests.fixtures.mistakes:proxy_pair returns 2 tensors"),
    ("target-returns-none", {"kind": "callable", "target": f"{M}:returns_none", **VECTOR}, "gradcheck", "float64",
     SKIPPED, "nothing to compare: the target returned no tensor (NoneType)"),
    ("target-returns-a-float", {"kind": "callable", "target": f"{M}:returns_float", **VECTOR}, "gradcheck", "float64",
     SKIPPED, "the target returned no tensor (float)"),
    ("target-is-a-generator", {"kind": "callable", "target": f"{M}:a_generator", **VECTOR}, "gradcheck", "float64",
     SKIPPED, "the target returned no tensor (generator)"),
    ("make-batch-a-generator", {"kind": "model", "target": f"{M}:model_batch_generator"}, "train_step", "float64",
     ERRORED, "make_batch(size, seed) must return (inputs, targets)"),
    ("make-batch-raises", {"kind": "model", "target": f"{M}:model_batch_raises"}, "train_step", "float64", ERRORED,
     "make_batch(8, 0) raised KeyError: 'no such split' (at "),
    ("make-batch-one-argument", {"kind": "model", "target": f"{M}:model_batch_one_argument"}, "train_step",
     "float64", ERRORED, "make_batch(8, 0) raised TypeError: "),
    ("loss-per-sample", {"kind": "model", "target": f"{M}:model_loss_per_sample"}, "train_step", "float64", ERRORED,
     "loss(output, targets) must return a scalar tensor (a mean or sum over the batch, which backward starts from); "
     "got a tensor of shape [8]"),
    ("loss-per-sample-accumulated", {"kind": "model", "target": f"{M}:model_loss_per_sample"}, "accumulation",
     "float64", ERRORED, "got a tensor of shape ["),
    ("loss-a-float", {"kind": "model", "target": f"{M}:model_loss_float"}, "train_step", "float64", ERRORED,
     "must return a scalar tensor (a mean or sum over the batch, which backward starts from); got float"),
    ("module-returns-a-dict", {"kind": "module", "target": f"{M}:factory_dict_output", **ROWS}, "gradcheck",
     "float64", HELD, ""),  # accepted: a dict's tensors are its outputs, as Hugging Face models return them
    ("module-returns-a-dict-wrong-gradient", {"kind": "module", "target": f"{M}:factory_dict_output_wrong_gradient",
                                              **ROWS}, "gradcheck", "float64", VIOLATED,
     "Jacobian mismatch for output 0 with respect to input 0"),  # and judged: it passed vacuously before
]


@pytest.mark.parametrize("spec, said", [row[1:] for row in AT_LOAD], ids=[row[0] for row in AT_LOAD])
def test_a_mistake_refused_when_the_target_loads_says_what_was_expected(tmp_path, spec, said):
    with pytest.raises(TargetError) as raised:
        resolve(entry(tmp_path, **spec), ROOT)
    assert said in str(raised.value), str(raised.value)
    assert "Traceback" not in str(raised.value) and "audit/" not in str(raised.value).replace("tests/", "")


@pytest.mark.parametrize("spec, check, dtype, verdict, said", [row[1:] for row in RUNNING],
                         ids=[row[0] for row in RUNNING])
def test_a_mistake_that_shows_while_running_is_a_cell_saying_what_came_back(tmp_path, spec, check, dtype, verdict,
                                                                             said):
    found = observe(entry(tmp_path, **spec), check, dtype, examples=3)
    assert found.verdict == verdict and said in found.message, found.message
    assert "the audit itself failed" not in found.message and "Traceback" not in found.message


def test_the_set_covers_every_object_a_registry_names():
    assert len(AT_LOAD) + len(RUNNING) >= 30
    named = " ".join(row[0] for row in AT_LOAD + RUNNING)
    for obj in ("target", "function", "op", "reference", "proxy", "module-factory", "model-factory", "make-batch",
                "loss"):
        assert obj in named, obj


@pytest.mark.slow
def test_a_registry_of_mistakes_runs_to_a_matrix_without_the_audit_failing(tmp_path):
    rows = AT_LOAD[::3] + RUNNING[::3]
    entries = [{"name": name, "owner": "@mistakes", **spec} for name, spec, *_ in rows]
    entries.append({"name": "correct", "owner": "@ok", "target": f"{M}:Cube", **VECTOR})
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "entries": entries}, sort_keys=False))
    done = subprocess.run([sys.executable, "-m", "audit", "run", "--registry", str(registry), "--out",
                           str(tmp_path / "out"), "--progress", "off", "-q", "-j", "2", "--check", "gradcheck",
                           "--check", "train_step", "--check", "forward"], capture_output=True, text=True, timeout=900,
                          cwd=ROOT)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "the audit itself failed" not in done.stdout + done.stderr
    matrix = json.loads((tmp_path / "out" / "matrix.json").read_text())
    cells = {e["name"]: e["cells"] for e in matrix["entries"]}
    assert all(c["status"] == "pass" for c in cells["correct"] if c["claimed"]), cells["correct"]
    for name, found in cells.items():
        assert not any("the audit itself failed" in c["message"] or "audit/" in c["message"].replace("tests/", "")
                       for c in found), (name, found)

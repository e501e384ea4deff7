"""The fingerprint of torch itself: what an import can change there, and what it cannot (torch's own changes)."""

from __future__ import annotations

import functools
import subprocess
import sys

import torch
from torch.overrides import TorchFunctionMode

from audit.runtime.fingerprint import changes, take
from tests.conftest import ROOT


def _wrapped(function):
    @functools.wraps(function)  # a wrapper carries the original's name and module: its code is still this file's
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


def test_an_unchanged_torch_has_no_changes():
    assert changes(take(), take()) == ()


def test_a_replaced_function_method_and_functional_are_named_with_the_module_that_replaced_them(monkeypatch):
    start = take()
    monkeypatch.setattr(torch, "softmax", _wrapped(torch.softmax))
    monkeypatch.setattr(torch.Tensor, "softmax", _wrapped(torch.Tensor.softmax))
    monkeypatch.setattr(torch.nn.functional, "softmax", _wrapped(torch.nn.functional.softmax))
    found = {change.what: change.by for change in changes(start, take())}
    assert found == {f"replaced {name}": __name__ for name in ("torch.softmax", "torch.Tensor.softmax",
                                                                "torch.nn.functional.softmax")}
    assert changes(start, take())[0].sentence("pkg") == f"importing {__name__} replaced torch.softmax"


def test_torch_replacing_its_own_member_is_no_change(monkeypatch):
    start = take()
    monkeypatch.setattr(torch, "softmax", torch.nn.functional.softmax)  # torch's own code, as Dynamo's wrappers
    assert changes(start, take()) == ()


def test_a_global_hook_a_mode_and_an_aten_kernel_are_changes():
    start = take()
    handle = torch.nn.modules.module.register_module_forward_hook(lambda module, args, output: output)
    mode = TorchFunctionMode()
    mode.__enter__()
    try:
        found = [change.what for change in changes(start, take())]
    finally:
        mode.__exit__(None, None, None)
        handle.remove()
    assert found == ["registered a global module forward hook (torch.nn.modules.module._global_forward_hooks)",
                     "left the mode TorchFunctionMode on torch's mode stack"]
    assert changes(start, take()) == ()  # both undone


def test_a_python_kernel_for_an_aten_operator_is_a_change():
    start = take()
    library = torch.library.Library("aten", "IMPL")
    library.impl("_foreach_abs", lambda tensors: tensors, "Meta")  # a Meta kernel computes no value: not counted
    assert changes(start, take()) == ()
    library.impl("_foreach_abs", lambda tensors: tensors, "CPU")
    try:
        assert [c.what for c in changes(start, take())] == ["registered a Python kernel for aten::_foreach_abs (CPU)"]
    finally:
        library._destroy()


def test_kernels_torch_registers_on_first_use_are_no_change():
    """functorch registers Python batching rules for aten operators on the first vmap (in a fresh process)."""
    code = ("import torch\nfrom audit.runtime.fingerprint import changes, take\nstart = take()\n"
            "torch.vmap(lambda a: torch.outer(a, a))(torch.ones(2, 2))\nprint(len(start.kernels ^ take().kernels), "
            "changes(start, take()))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    registered, found = done.stdout.split(" ", 1)
    assert int(registered) > 0 and found.strip() == "()", done.stdout


def test_a_change_made_after_a_look_that_found_none_is_still_seen_and_undoing_it_is_seen_too(monkeypatch):
    """A look where nothing changed reuses the last listing (it is not made again after every cell); one made after
    a change lists again and finds it, whichever look came before, and finds nothing once it is undone."""
    start = take(operators=False)
    assert take(operators=False).members is start.members and changes(start, take(operators=False)) == ()
    original = torch.Tensor.softmax
    monkeypatch.setattr(torch.Tensor, "softmax", _wrapped(original))
    assert [change.what for change in changes(start, take(operators=False))] == ["replaced torch.Tensor.softmax"]
    monkeypatch.setattr(torch.Tensor, "softmax", original)
    assert changes(start, take(operators=False)) == ()
    lib = torch.library.Library("aten", "IMPL")
    try:
        lib.impl("_foreach_sqrt", lambda tensors: tensors, "CPU")
        assert [change.what for change in changes(start, take(operators=False))] == [
            "registered a Python kernel for aten::_foreach_sqrt (CPU)"]
    finally:
        lib._destroy()

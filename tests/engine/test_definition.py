"""An entry's digest covers its own definition and what it uses, not its neighbours in the same file."""

from __future__ import annotations

import importlib
import sys
import textwrap

from audit.runtime import definition

MODULE = '''
import torch

SCALE = {scale}


def _helper(x):
    return x * SCALE


class First(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return _helper(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * SCALE


class Second(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * {second}

    @staticmethod
    def backward(ctx, grad):
        return grad * {second}
'''


def _load(tmp_path, monkeypatch, name, **values):
    folder = tmp_path / name
    folder.mkdir()
    (folder / f"{name}.py").write_text(textwrap.dedent(MODULE.format(**values)))
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop(name, None)
    importlib.invalidate_caches()
    return importlib.import_module(name)


def test_a_neighbour_changing_leaves_the_digest_alone_and_a_dependency_does_not(tmp_path, monkeypatch):
    before = _load(tmp_path, monkeypatch, "defs_a", scale=2, second=3)
    after = _load(tmp_path, monkeypatch, "defs_b", scale=2, second=5)
    helper = _load(tmp_path, monkeypatch, "defs_c", scale=7, second=3)

    def digest(module, name):
        return [t.split("\n", 1)[1] for t in definition.sources(getattr(module, name))]

    assert digest(before, "First") == digest(after, "First")  # Second changed: First is untouched
    assert digest(before, "Second") != digest(after, "Second")
    assert digest(before, "First") != digest(helper, "First")  # a constant it reads changed
    assert any("def _helper" in t for t in digest(before, "First"))

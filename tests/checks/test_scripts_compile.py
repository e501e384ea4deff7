"""Every check's replayed functions (its property, model property and helpers, as a replay script embeds them after
the replay kit) are valid Python on every supported interpreter and name nothing the script does not define: a
syntax error or a name the script lacks (a module the check's file imports, say) would leave a failure without a
replay, and the replay test only reaches checks with a planted bug."""

from __future__ import annotations

import builtins
import dis
import importlib
import inspect
import types

import pytest

from audit.checks import builtin
from audit.checking.replayable import UNGUARDED
from audit.engine.script import kit_source

CHECKS = [name for name, check in builtin().items() if check.replay or check.model_replay]
#: What a script defines besides the kit and the check's functions: its target, arguments and values.
SCRIPT_NAMES = {*UNGUARDED, "fn", "ref", "args", "seed", "dtype", "device"}


def replayed(check) -> list:
    """The functions (and classes) a script embeds for ``check``."""
    return [f for f in (*check.replay_helpers, check.replay, check.model_replay) if f is not None]


def global_names(code) -> set:
    """The global names ``code`` (and the code nested in it) loads."""
    found = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found |= global_names(const)
    return found


def codes(function) -> list:
    """A function's code, or the code of each method of a class written in its source (not those ``dataclass``
    generates: they run in its own namespace)."""
    if inspect.isclass(function):
        return [m.__code__ for m in vars(function).values() if inspect.isfunction(m)
                and m.__code__.co_filename.startswith("<") and m.__code__.co_filename != "<string>"] + [
            m.fget.__code__ for m in vars(function).values() if isinstance(m, property)]
    return [function.__code__]


#: What a script's own lines (its case and its call) use of the kit, besides what the property uses.
SCRIPT_TAIL = "guarded(through_dense(laid_out(sparse_from(report(Tolerance)))))"


@pytest.mark.parametrize("name", CHECKS)
def test_the_replayed_functions_compile_and_name_only_what_the_script_defines(name):
    """With the kit as a script carries it: only what the property, its helpers and the script's lines reach."""
    namespace: dict = {}
    functions = replayed(builtin()[name])
    sources = [inspect.getsource(function) for function in functions]
    header = "from __future__ import annotations\nimport sys\nimport torch\n"
    exec(compile(header + kit_source("\n".join([*sources, SCRIPT_TAIL])), "<kit>", "exec"), namespace)
    carried = [v for v in namespace.values() if (inspect.isfunction(v) or inspect.isclass(v))
               and getattr(getattr(v, "__code__", None), "co_filename", "<kit>") == "<kit>"
               and getattr(v, "__module__", None) in (None, "builtins")]
    for function, source in zip(functions, sources):
        exec(compile("from __future__ import annotations\n" + source, f"<{name}: {function.__name__}>", "exec"),
             namespace)
    missing = {n for f in [*functions, *carried] for code in codes(f) for n in global_names(code)
               if n not in namespace and n not in SCRIPT_NAMES and not hasattr(builtins, n)}
    assert not missing, f"{name}'s replay script lacks names its functions use: {sorted(missing)}"


def test_a_script_carries_only_the_kit_it_uses():
    carried = kit_source("mismatches")
    assert "def mismatches(" in carried and "def mismatch(" in carried and "class Tolerance" not in carried
    assert len(carried.splitlines()) < len(kit_source().splitlines()) / 4


@pytest.mark.parametrize("name", CHECKS)
def test_no_value_a_script_writes_shadows_a_function_it_carries(name):
    """A script writes each value its property takes as a global (``wider_dtype = torch.float32``): a value named
    like a kit function (``widest``) would replace that function for every kit helper that calls it."""
    from audit.kit import MODULES

    check = builtin()[name]
    defined = {n for module in MODULES for n, v in vars(importlib.import_module(f"audit.kit.{module}")).items()
               if inspect.isfunction(v) or inspect.isclass(v)}
    defined |= {f.__name__ for f in replayed(check)}
    for prop in (check.replay, check.model_replay):
        if prop is None:
            continue
        values = {p.name for p in inspect.signature(prop).parameters.values() if p.kind is p.KEYWORD_ONLY}
        assert not values & defined, f"{name}: values shadow carried functions: {sorted(values & defined)}"

"""The compiled schema shortcut answers exactly as jsonschema does, or declines; it never passes an invalid registry."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from audit.registry import quick
from audit.registry import schema as schema_mod
from tests.registry.fuzz import BASE, WRONG

#: Values where Python's and JSON Schema's types or equality part ways, plus each keyword's edges.
EDGES = [
    (("version",), [1, 1.0, True]),
    (("entries", 0, "supports", "compile"), [1, 0, True, False, "fullgraph", 1.0]),
    (("entries", 0, "inputs", 0, "shape"), [[True], [1.0], [2], [0], [2 ** 31 - 1], ["B", "B"]]),
    (("entries", 0, "inputs", 0, "domain"), [[float("nan"), 1], [-1.0, True], [-1, 1.5]]),
    (("entries", 0, "inputs", 0), [{"value": 3, "shape": [1]}, {"value": None}, {"shape": [1], "value": []}, 5]),
    (("entries", 0, "inputs", 0, "density"), [0, 0.5, 1, 1.5]),
    (("entries", 0, "supports", "dtypes"), [["float64", "float64"], ["float64", "float32"], []]),
    (("entries", 0, "checks"), [["mine", "mine"], ["mine", "yours"]]),
    (("entries", 0, "owner"), [["@a"], [], "", ["@a", 3], "@a", None]),
    (("entries", 0, "dims"), [{"9x": [1, 2]}, {"B": [1, 2], "C_2": [0, 0]}]),
    (("entries", 0, "name"), ["x" * 200, "x" * 201, "-x", "a:b.c"]),
    (("entries", 0, "training"), [{"batch": 1}, {"batch": 2, "lr": 0}, {"lr": 0.1}, {"batches": True}]),
    (("profiles",), [{"p": {"examples": 0}}, {"p": {"timeout": 0}}, {"p": {"timeout": 1}}, {"-p": {}}]),
    (("entries", 0, "expect", 0, "status"), ["fail", "skip", "pass", True]),
]


def _with(path, value) -> dict:
    document = copy.deepcopy(BASE)
    *parents, last = path
    target = document
    for key in parents:
        target = target[key]
    target[last] = value
    return document


def _cases():
    return [(path, value) for path, values in WRONG + EDGES for value in values]


def test_the_shipped_schema_compiles():
    """A keyword the shortcut does not know would silently turn it off: extend quick.py with the schema."""
    assert quick.registry_check() is not None


def test_a_valid_registry_takes_the_shortcut():
    assert schema_mod.validator().is_valid(BASE)
    assert quick.registry_check()(BASE) is True


@pytest.mark.parametrize("path, value", _cases(), ids=lambda x: repr(x)[:40])
def test_the_shortcut_agrees_with_jsonschema_or_declines(path, value):
    document = _with(path, value)
    expected = schema_mod.validator().is_valid(document)
    try:
        answer = quick.registry_check()(document)
    except quick.Unsure:
        return  # declined: jsonschema decides
    assert answer == expected, f"{path} = {value!r}: the shortcut says {answer}, jsonschema {expected}"


def test_an_unknown_keyword_turns_the_shortcut_off():
    with pytest.raises(quick.Unsupported):
        quick.compile_schema({"type": "object", "properties": {"a": {"allOf": [{"type": "string"}]}}})


#: Small schemas for what the registry schema leaves out: overlapping oneOf branches, if without else.
SYNTHETIC = [
    ({"oneOf": [{"type": "number"}, {"minimum": 0}]}, [5, -1.5, "x", True, 2.0]),
    ({"if": {"type": "string"}, "then": {"minLength": 2}}, ["a", "ab", 3, None]),
    ({"type": "object", "additionalProperties": {"type": "integer"}, "properties": {"a": {}}},
     [{"a": "x", "b": 1}, {"b": "x"}, {"b": 2.0}, []]),
    ({"type": ["integer", "null"], "exclusiveMaximum": 3}, [None, 3, 2, 2.5, False]),
    ({"type": "array", "items": {"enum": [0, "0"]}, "maxItems": 2}, [[0], ["0", 0.0], [False], [0, 0, 0]]),
]


@pytest.mark.parametrize("schema, values", SYNTHETIC, ids=lambda x: repr(x)[:30])
def test_each_keyword_agrees_with_jsonschema(schema, values):
    import jsonschema

    check = quick.compile_schema(schema)
    for value in values:
        assert check(value) == jsonschema.Draft7Validator(schema).is_valid(value), f"{schema} on {value!r}"


def test_a_valid_registry_loads_without_importing_jsonschema(tmp_path):
    """The shortcut is what load_registry uses: jsonschema (and its descent) only for an invalid registry."""
    path = tmp_path / "registry.yaml"
    path.write_text(yaml.safe_dump(BASE))
    code = ("import sys; from audit.registry.load import load_registry; load_registry(sys.argv[1]); "
            "print('jsonschema' in sys.modules)")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code, str(path)], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"

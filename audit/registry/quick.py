"""A fast yes or no to "does this document satisfy the registry schema?", compiled from the schema file itself.

jsonschema descends every value with a fresh validator object: about 1.5 s for 1,000 entries, most of
``audit list`` and ``audit validate``. A valid registry needs only the answer, which the schema compiled here
to nested functions gives in a few milliseconds, by jsonschema's own rules (draft-07; its types: a bool is no
integer; its equality: ``true`` is not ``1``). Whatever it cannot decide exactly (a value type YAML does not
produce, repeated items it cannot compare) raises :class:`Unsure`; an invalid or undecided document goes to
jsonschema, which also phrases every located error. A schema keyword unknown here disables the shortcut.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from audit.registry import schema as schema_mod

#: A yes or no about one value of the document (JSON-like: what the YAML converted to).
Check = Callable[[Any], bool]
#: A schema keyword compiled: the JSON types it constrains (None: every type), and its test.
Compiled = tuple[tuple[str, ...] | None, Check]

#: Keywords that say nothing about validity.
ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples"})
#: The JSON type of each Python type YAML conversion produces (exact types: a bool is not an int here).
_KINDS: dict[type, str] = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null",
                           int: "integer", float: "number"}


class Unsure(Exception):
    """The shortcut cannot decide this value exactly; jsonschema must."""


class Unsupported(Exception):
    """The schema uses a keyword the shortcut does not implement."""


def valid(document: object) -> bool:
    """True only when ``document`` surely satisfies the registry schema (False: invalid, or ask jsonschema)."""
    check = registry_check()
    if check is None:
        return False
    try:
        return check(document)
    except Unsure:
        return False


@functools.lru_cache(maxsize=1)
def registry_check() -> Check | None:
    """The compiled registry schema, or None when it uses a keyword this module does not know."""
    try:
        return compile_schema(schema_mod.schema())
    except Unsupported:
        return None


def compile_schema(schema: dict[str, Any] | bool) -> Check:
    """``schema`` (draft-07) as a function value -> bool; raises :class:`Unsupported` for unknown keywords.
    Each keyword's test is filed under the JSON types it constrains (JSON Schema ignores ``minLength`` on a
    number), so a value's type is looked up once per schema, not once per keyword."""
    if isinstance(schema, bool):
        return lambda value: schema
    tests: dict[str, list[Check]] = {name: [] for name in set(_KINDS.values())}
    for name, spec in schema.items():
        if name in ANNOTATIONS or name in ("type", "then", "else"):  # then and else belong to if
            continue
        maker = _MAKERS.get(name)
        if maker is None:
            raise Unsupported(name)
        applies, test = maker(spec, schema)
        for found in applies or tests:
            tests[found].append(test)
    return _checker(_accepted(schema.get("type")), {name: tuple(found) for name, found in tests.items()})


def _checker(accepted: frozenset[str] | None, tests: dict[str, tuple[Check, ...]]) -> Check:
    by_type = {python: _type_tests(kind, accepted, tests[kind]) for python, kind in _KINDS.items()}

    def check(value: object) -> bool:
        try:
            found = by_type[type(value)]  # the one lookup made for every value of the document
        except KeyError:
            raise Unsure(type(value).__name__) from None
        if found is None:
            return False
        for test in found:  # noqa: SIM110  (a loop, not all(): no generator made for every value)
            if not test(value):
                return False
        return True

    return check


def _type_tests(kind: str, accepted: frozenset[str] | None, tests: tuple[Check, ...]) -> tuple[Check, ...] | None:
    """The tests a value of JSON type ``kind`` must pass, None when ``type`` refuses it."""
    if accepted is None or kind in accepted:
        return tests
    if kind == "number" and "integer" in accepted:
        return (float.is_integer,) + tests  # draft-07: a float without a fraction (1.0) is an integer too
    return None


def _accepted(spec: str | list[str] | None) -> frozenset[str] | None:
    """The kinds ``type`` admits (a number admits an integer), None without ``type``."""
    if spec is None:
        return None
    accepted = set(spec if isinstance(spec, list) else [spec])
    return frozenset(accepted | {"integer"} if "number" in accepted else accepted)


def kind(value: object) -> str:
    """The JSON type of a converted YAML value; :class:`Unsure` for any other Python type."""
    try:
        return _KINDS[type(value)]
    except KeyError:
        raise Unsure(type(value).__name__) from None


def equal(one: object, two: object) -> bool:
    """jsonschema's equality for scalars (``true`` is not ``1``, ``1`` is ``1.0``); two containers: Unsure."""
    if isinstance(one, str) or isinstance(two, str):
        return one == two
    containers = isinstance(one, (list, dict)) + isinstance(two, (list, dict))
    if containers:
        if containers == 2:
            raise Unsure("containers compared")
        return False
    kind(one), kind(two)
    return (type(one) is bool) == (type(two) is bool) and one == two


#: The kinds each family of keywords constrains; a keyword's maker returns (kinds or None for all, test).
_NUMBERS, _STRING, _ARRAY, _OBJECT = ("integer", "number"), ("string",), ("array",), ("object",)


def _enum(spec: Any, schema: dict[str, Any]) -> Compiled:
    strings = frozenset(each for each in spec if isinstance(each, str))

    def test(value: Any) -> bool:
        if type(value) is str:  # equal to a string member only (equal() compares a string with ==)
            return value in strings
        return any(equal(each, value) for each in spec)

    return None, test


def _const(spec: Any, schema: dict[str, Any]) -> Compiled:
    return None, lambda value: equal(spec, value)


def _pattern(spec: Any, schema: dict[str, Any]) -> Compiled:
    search = re.compile(spec).search
    return _STRING, lambda value: search(value) is not None


def _bound(compare: Callable[[Any, Any], bool]) -> Callable[[Any, dict[str, Any]], Compiled]:
    """A numeric keyword: ``compare(value, limit)`` says the value is out of bounds."""
    return lambda spec, schema: (_NUMBERS, lambda value: not compare(value, spec))


def _length(kinds: tuple[str, ...], compare: Callable[[int, Any], bool]) -> Callable[[Any, dict[str, Any]], Compiled]:
    """A length keyword on strings or arrays: ``compare(len, limit)`` says too short or too long."""
    return lambda spec, schema: (kinds, lambda value: not compare(len(value), spec))


def _unique(spec: Any, schema: dict[str, Any]) -> Compiled:
    def test(value: Any) -> bool:
        if not spec or len(value) < 2:
            return True
        if not all(type(item) is str for item in value):
            raise Unsure("uniqueItems over non-strings")
        return len(set(value)) == len(value)

    return _ARRAY, test


def _required(spec: Any, schema: dict[str, Any]) -> Compiled:
    required = frozenset(spec)
    return _OBJECT, lambda value: value.keys() >= required


def _properties(spec: Any, schema: dict[str, Any]) -> Compiled:
    checks = {key: compile_schema(sub) for key, sub in spec.items()}

    def test(value: Any) -> bool:  # over the value's keys: an entry has a few of the schema's many properties
        for key, item in value.items():
            check = checks.get(key)
            if check is not None and not check(item):
                return False
        return True

    return _OBJECT, test


def _additional(spec: Any, schema: dict[str, Any]) -> Compiled:
    if "patternProperties" in schema:
        raise Unsupported("patternProperties")
    known = frozenset(schema.get("properties", {}))
    if spec is False:
        return _OBJECT, known.issuperset
    check = compile_schema(spec)
    return _OBJECT, lambda value: all(check(item) for key, item in value.items() if key not in known)


def _property_names(spec: Any, schema: dict[str, Any]) -> Compiled:
    check = compile_schema(spec)
    return _OBJECT, lambda value: all(check(key) for key in value)


def _items(spec: Any, schema: dict[str, Any]) -> Compiled:
    if isinstance(spec, list):
        raise Unsupported("items as a list of schemas")
    check = compile_schema(spec)
    return _ARRAY, lambda value: all(map(check, value))


def _one_of(spec: Any, schema: dict[str, Any]) -> Compiled:
    checks = [compile_schema(sub) for sub in spec]
    return None, lambda value: sum(1 for check in checks if check(value)) == 1


def _if(spec: Any, schema: dict[str, Any]) -> Compiled:
    condition = compile_schema(spec)
    then = compile_schema(schema.get("then", True))
    otherwise = compile_schema(schema.get("else", True))
    return None, lambda value: then(value) if condition(value) else otherwise(value)


_MAKERS: dict[str, Callable[[Any, dict[str, Any]], Compiled]] = {
    "enum": _enum, "const": _const, "pattern": _pattern,
    "minimum": _bound(lambda v, limit: v < limit), "maximum": _bound(lambda v, limit: v > limit),
    "exclusiveMinimum": _bound(lambda v, limit: v <= limit), "exclusiveMaximum": _bound(lambda v, limit: v >= limit),
    "minLength": _length(_STRING, lambda n, limit: n < limit),
    "maxLength": _length(_STRING, lambda n, limit: n > limit),
    "minItems": _length(_ARRAY, lambda n, limit: n < limit), "maxItems": _length(_ARRAY, lambda n, limit: n > limit),
    "uniqueItems": _unique, "required": _required, "properties": _properties, "additionalProperties": _additional,
    "propertyNames": _property_names, "items": _items, "oneOf": _one_of, "if": _if,
}

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

from audit.registry import schema as schema_mod

#: Keywords that say nothing about validity.
ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples"})
#: The JSON type of each Python type YAML conversion produces (exact types: a bool is not an int here).
_KINDS = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null", int: "integer",
          float: "number"}


class Unsure(Exception):
    """The shortcut cannot decide this value exactly; jsonschema must."""


class Unsupported(Exception):
    """The schema uses a keyword the shortcut does not implement."""


def valid(document) -> bool:
    """True only when ``document`` surely satisfies the registry schema (False: invalid, or ask jsonschema)."""
    check = registry_check()
    if check is None:
        return False
    try:
        return check(document)
    except Unsure:
        return False


@functools.lru_cache(maxsize=1)
def registry_check():
    """The compiled registry schema, or None when it uses a keyword this module does not know."""
    try:
        return compile_schema(schema_mod.schema())
    except Unsupported:
        return None


def compile_schema(schema):
    """``schema`` (draft-07) as a function value -> bool; raises :class:`Unsupported` for unknown keywords."""
    if isinstance(schema, bool):
        return lambda value: schema
    tests = [_keyword(name, spec, schema) for name, spec in schema.items()
             if name not in ANNOTATIONS and name not in ("then", "else")]  # then/else belong to if

    def check(value) -> bool:
        for test in tests:
            if not test(value):
                return False
        return True

    return check


def _keyword(name: str, spec, schema):
    maker = _MAKERS.get(name)
    if maker is None:
        raise Unsupported(name)
    return maker(spec, schema)


def kind(value) -> str:
    """The JSON type of a converted YAML value; :class:`Unsure` for any other Python type."""
    try:
        return _KINDS[type(value)]
    except KeyError:
        raise Unsure(type(value).__name__) from None


def _number(value) -> bool:
    return kind(value) in ("integer", "number")


def equal(one, two) -> bool:
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


def _type(spec, schema):
    accepted = set(spec if isinstance(spec, list) else [spec])
    if "number" in accepted:
        accepted.add("integer")
    whole = "integer" in accepted  # draft-07: a float without a fraction (1.0) is an integer too

    def test(value) -> bool:
        found = kind(value)
        return found in accepted or (whole and found == "number" and value.is_integer())

    return test


def _enum(spec, schema):
    return lambda value: any(equal(each, value) for each in spec)


def _const(spec, schema):
    return lambda value: equal(spec, value)


def _pattern(spec, schema):
    search = re.compile(spec).search
    return lambda value: kind(value) != "string" or search(value) is not None


def _bound(compare):
    """A numeric keyword: ``compare(value, limit)`` says the value is out of bounds; non-numbers pass."""
    return lambda spec, schema: lambda value: not _number(value) or not compare(value, spec)


def _length(of: str, compare):
    """A length keyword on strings or arrays: ``compare(len, limit)`` says too short or too long."""
    return lambda spec, schema: lambda value: kind(value) != of or not compare(len(value), spec)


def _unique(spec, schema):
    def test(value) -> bool:
        if not spec or kind(value) != "array" or len(value) < 2:
            return True
        if not all(type(item) is str for item in value):
            raise Unsure("uniqueItems over non-strings")
        return len(set(value)) == len(value)

    return test


def _required(spec, schema):
    return lambda value: kind(value) != "object" or all(key in value for key in spec)


def _properties(spec, schema):
    checks = [(key, compile_schema(sub)) for key, sub in spec.items()]

    def test(value) -> bool:
        if kind(value) != "object":
            return True
        for key, check in checks:
            if key in value and not check(value[key]):
                return False
        return True

    return test


def _additional(spec, schema):
    if "patternProperties" in schema:
        raise Unsupported("patternProperties")
    known = frozenset(schema.get("properties", {}))
    check = compile_schema(spec)

    def test(value) -> bool:
        if kind(value) != "object":
            return True
        return all(check(item) for key, item in value.items() if key not in known)

    return test


def _property_names(spec, schema):
    check = compile_schema(spec)
    return lambda value: kind(value) != "object" or all(check(key) for key in value)


def _items(spec, schema):
    if isinstance(spec, list):
        raise Unsupported("items as a list of schemas")
    check = compile_schema(spec)
    return lambda value: kind(value) != "array" or all(check(item) for item in value)


def _one_of(spec, schema):
    checks = [compile_schema(sub) for sub in spec]
    return lambda value: sum(1 for check in checks if check(value)) == 1


def _if(spec, schema):
    condition = compile_schema(spec)
    then = compile_schema(schema.get("then", True))
    otherwise = compile_schema(schema.get("else", True))
    return lambda value: then(value) if condition(value) else otherwise(value)


_MAKERS = {
    "type": _type, "enum": _enum, "const": _const, "pattern": _pattern,
    "minimum": _bound(lambda v, limit: v < limit), "maximum": _bound(lambda v, limit: v > limit),
    "exclusiveMinimum": _bound(lambda v, limit: v <= limit), "exclusiveMaximum": _bound(lambda v, limit: v >= limit),
    "minLength": _length("string", lambda n, limit: n < limit), "maxLength": _length("string", lambda n, limit: n > limit),
    "minItems": _length("array", lambda n, limit: n < limit), "maxItems": _length("array", lambda n, limit: n > limit),
    "uniqueItems": _unique, "required": _required, "properties": _properties, "additionalProperties": _additional,
    "propertyNames": _property_names, "items": _items, "oneOf": _one_of, "if": _if,
}

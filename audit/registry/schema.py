"""The shipped JSON Schema (draft-07) and its errors rephrased as 'expected X, got Y'."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # jsonschema is imported only where a registry is invalid (see validator)
    from jsonschema import Draft7Validator
    from jsonschema.exceptions import ValidationError

SCHEMA_FILE = "registry.schema.json"

PATTERN_HINTS = {
    "^[A-Za-z0-9._:][A-Za-z0-9._:-]*$": "letters, digits and . _ : - (not starting with -, which a command line "
                                        "would take for an option)",
    "^[A-Za-z_][A-Za-z0-9_]*$": "an identifier (letters, digits, _)",
    r"^\d{4}-\d{2}-\d{2}$": "a date YYYY-MM-DD",
    r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$": "'module:Qualname'",
}


def schema_path() -> str:
    """Where the shipped schema file lies (for the yaml-language-server modeline)."""
    from importlib import resources

    return str(resources.files("audit.schema").joinpath(SCHEMA_FILE))


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The registry schema as a dict, read beside this package (as :func:`schema_path` finds it): without
    importlib.resources, whose imports (tempfile, shutil, zipfile...) cost ``audit list`` more than the read."""
    text = (Path(__file__).parent.parent / "schema" / SCHEMA_FILE).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@functools.lru_cache(maxsize=1)
def validator() -> Draft7Validator:
    """A draft-07 validator for the registry schema."""
    import jsonschema

    return jsonschema.Draft7Validator(schema())


def describe(value: object) -> str:
    """A value as an error message shows it: its repr and, for containers, its kind."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    text = repr(value)
    return text if len(text) <= ECHO_LIMIT else f"{text[:ECHO_LIMIT]}... ({len(text):,} characters)"


#: Values echoed in messages are cut here, with their length: a 5 MB name is not 5 MB of stderr.
ECHO_LIMIT = 80


def _bound(limit: float) -> str:
    return str(limit) if isinstance(limit, int) else f"{limit:.4g}"


def _types(expected: str | list[str]) -> str:
    names = {"integer": "an integer", "number": "a number", "string": "a string", "array": "a list",
             "object": "a mapping", "boolean": "true or false", "null": "null"}
    listed = expected if isinstance(expected, list) else [expected]
    return " or ".join(names.get(t, t) for t in listed)


def _yaml_word(value: object) -> str:
    """A value as a registry spells it (``true``, not Python's ``True``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def fields(error: ValidationError) -> tuple[Any, Any, Any, Any]:
    """The keyword that failed, its value in the schema, the value it judged and the schema it belongs to: JSON,
    whatever types jsonschema gives them."""
    return error.validator, error.validator_value, error.instance, error.schema


def phrase(error: ValidationError) -> str:
    """A jsonschema ``ValidationError`` as a sentence saying what was expected."""
    kind, spec, value, owner = fields(error)
    if kind == "type":
        return f"expected {_types(spec)}, got {describe(value)}"
    if kind == "enum":
        return f"expected one of {', '.join(map(_yaml_word, spec))}, got {describe(value)}"
    if kind == "const":
        return f"expected {spec!r}, got {describe(value)}"
    if kind == "pattern":
        return f"expected {PATTERN_HINTS.get(spec, 'a match for ' + spec)}, got {describe(value)}"
    if kind == "required":
        missing = [k for k in spec if k not in value]
        return f"missing required key {', '.join(map(repr, missing))}"
    if kind in ("minItems", "maxItems"):
        word = "at least" if kind == "minItems" else "at most"
        return f"expected {word} {spec} item{'s' if spec != 1 else ''}, got {len(value)}"
    if kind == "minimum":
        return f"expected a value >= {_bound(spec)}, got {describe(value)}"
    if kind == "maximum":
        return f"expected a value <= {_bound(spec)}, got {describe(value)}"
    if kind == "exclusiveMinimum":
        return f"expected a value > {_bound(spec)}, got {describe(value)}"
    if kind == "minLength":
        return "expected a non-empty string"
    if kind == "maxLength":
        return f"expected at most {spec} characters, got {len(value):,}"
    if kind == "uniqueItems":
        return "expected no repeated items"
    if kind == "oneOf" and {a.get("type") for a in spec} == {"integer", "string"}:
        size = next(a for a in spec if a["type"] == "integer")
        return (f"expected a fixed size (an integer from {size['minimum']} to {size['maximum']}) or a dim name, "
                f"got {describe(value)}")
    if kind == "oneOf" and owner.get("description", "").startswith("Who answers"):
        return f"expected a string or a list of strings, got {describe(value)}"
    return str(error.message)

"""Write the documentation's generated sections from the code's single sources, so the docs cannot drift.

    python docs/generate.py          rewrite every generated section in place
    python docs/generate.py --check  exit 1, naming each stale page, if a rewrite would change anything

A generated section sits in a hand-written page between two markers:

    <!-- generated: NAME (python docs/generate.py; edit the source, not this) -->
    ...
    <!-- end generated: NAME -->

Sources: the check table from the catalog's declarations (audit.checks.declarations(): contract and claim of
each check, without importing torch), the registry keys from the JSON Schema (audit/schema/registry.schema.json),
the profiles from audit.app.profiles through audit.runtime.settings.settle, the pyproject.toml settings from
audit.app.config (derived from the settings' declarations, audit.runtime.settings), the command reference from click
(audit.cli.cli).
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from audit.checks import declarations  # noqa: E402  (after the path: runs from a checkout without install)
from audit.catalog.interface import OPERATOR_KINDS  # noqa: E402
from audit.cli import cli  # noqa: E402
from audit.app.config import KEYS  # noqa: E402
from audit.app.profiles import BUILTIN, DEFAULT  # noqa: E402
from audit.registry.schema import schema_path  # noqa: E402
from audit.runtime.settings import PROFILE, settable, settle  # noqa: E402

BEGIN = "<!-- generated: {name} (python docs/generate.py; edit the source, not this) -->"
END = "<!-- end generated: {name} -->"


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _table(header: tuple[str, ...], rows) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def checks() -> str:
    """The built-in checks in matrix order: contract, what claims it, the entry kinds, sparse inputs."""
    rows = []
    for name, check in declarations().items():
        extra = check.kinds[len(OPERATOR_KINDS):] if check.kinds[:len(OPERATOR_KINDS)] == OPERATOR_KINDS else None
        kinds = ", ".join(("operators", *extra)) if extra is not None else ", ".join(check.kinds)
        sparse = f"skip: {check.not_for_sparse}" if check.not_for_sparse else "runs"
        rows.append((f"`{name}`", check.contract, f"`{check.claim}`" if check.claim else "always", kinds, sparse))
    kinds = ", ".join(f"`{kind}`" for kind in OPERATOR_KINDS)
    return (_table(("check", "contract", "claimed through", "kinds", "sparse inputs"), rows)
            + f"\n\nKinds: *operators* are the entries of kind {kinds}, all called with drawn tensors.")


def _literal(value) -> str:
    """A schema value as YAML writes it (true, not True)."""
    return value if isinstance(value, str) else json.dumps(value)


def _schema_type(node: dict) -> str:
    """What a key takes, in words: a literal, a choice of literals, a type or a list of one."""
    if "const" in node:
        return f"`{_literal(node['const'])}`"
    if "enum" in node:
        return " | ".join(f"`{_literal(value)}`" for value in node["enum"])
    if "oneOf" in node:
        return " or ".join(_schema_type(option) for option in node["oneOf"])
    kind = node.get("type", "any")
    if isinstance(kind, list):  # one of several JSON types (a number, or a list of them)
        return " or ".join(_schema_type({**node, "type": one}) for one in kind)
    if kind == "array" and isinstance(node.get("items"), dict) and "if" not in node["items"]:
        return f"list of {_schema_type(node['items'])}"
    return kind


def _schema_rows(node: dict, path: str, claims: dict[str, str]):
    """(key, type, description) for every key under ``node``, depth first, in the schema's order; keys that all
    take the same schema (tolerance's dtypes) are one row, ``KEY``, naming them."""
    properties = node.get("properties", {})
    alike = list(properties.values())
    if len(alike) > 2 and all(sub == alike[0] for sub in alike):
        names = ", ".join(f"`{key}`" for key in properties)
        yield f"`{path}.KEY`", _schema_type(alike[0]), f"KEY is one of {names}."
        yield from _schema_children(alike[0], f"{path}.KEY", claims)
        return
    for key, sub in properties.items():
        where = f"{path}.{key}" if path else key
        text = sub.get("description", "")
        check = claims.get(where.removeprefix("entries[]."))
        if check and check not in text:
            text = f"{text} Claims the `{check}` check.".strip()
        yield f"`{where}`", _schema_type(sub), text
        yield from _schema_children(sub, where, claims)


def _schema_children(sub: dict, where: str, claims: dict[str, str]):
    """The rows below one key: its own keys, its list items' (both branches of an if), its named entries'."""
    yield from _schema_rows(sub, where, claims)
    items = sub.get("items")
    if isinstance(items, dict):
        for branch in ("then", "else"):
            if branch in items:
                yield from _schema_rows(items[branch], f"{where}[]", claims)
        yield from _schema_rows(items, f"{where}[]", claims)
    if isinstance(sub.get("additionalProperties"), dict):
        yield from _schema_rows(sub["additionalProperties"], f"{where}.NAME", claims)


def registry_keys() -> str:
    """Every key of registry schema v1, from the shipped JSON Schema; claims named from the check catalog."""
    schema = json.loads(Path(schema_path()).read_text())
    claims = {check.claim: name for name, check in declarations().items() if check.claim}
    top = {key: sub for key, sub in schema["properties"].items() if key != "defaults"}
    rows = list(_schema_rows({"properties": top}, "", claims))
    defaults = ", ".join(f"`{key}`" for key in schema["properties"]["defaults"]["properties"])
    return _table(("key", "type", "meaning"), rows) + f"\n\n`defaults` takes these keys of an entry: {defaults}."


def _yaml(value) -> str:
    """A setting as the registry writes it: true and false in lower case."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def profiles() -> str:
    """The built-in profiles and the defaults (audit.app.profiles): every setting a profile may set, as it settles."""
    names = settable(PROFILE)
    rows = [(f"`{profile.name}`", *(_yaml(getattr(settle(profile=dict(profile.values)), name)) for name in names))
            for profile in (*BUILTIN.values(), DEFAULT)]
    rows[-1] = ("no `--profile`", *rows[-1][1:])
    return _table(("profile", *names), rows)


def settings() -> str:
    """The keys of [tool.autograd-audit] in pyproject.toml (audit.app.config.KEYS)."""
    rows = [(f"`{key}`", ", ".join(f"`audit {command}`" for command in commands), "yes" if is_path else "")
            for key, (commands, is_path) in KEYS.items()]
    return _table(("key", "sets the option of", "a path, relative to pyproject.toml"), rows)


def commands() -> str:
    """Every command's usage, help and options, from click."""
    parent = click.Context(cli, info_name="audit")
    parts = []
    for name, command in cli.commands.items():
        ctx = click.Context(command, info_name=name, parent=parent)
        usage = " ".join(["audit", name, *command.collect_usage_pieces(ctx)])
        options = [param.get_help_record(ctx) for param in command.get_params(ctx)]
        rows = [(f"`{record[0]}`", record[1]) for record in options if record and "--help" not in record[0]]
        parts.append(f"### `audit {name}`\n\n```text\n{usage}\n```\n\n{inspect.cleandoc(command.help or '')}\n\n"
                     + _table(("option", "meaning"), rows))
    return "\n\n".join(parts)


def columns() -> str:
    """The matrix's columns: every built-in check name, in the catalog's order."""
    return ", ".join(f"`{name}`" for name in declarations()) + "."


#: page -> the generated sections it holds, each rendered by one function above.
PAGES = {
    "docs/checks.md": {"checks": checks},
    "docs/contract.md": {"columns": columns},
    "docs/registry.md": {"registry-keys": registry_keys, "profiles": profiles},
    "docs/commands.md": {"commands": commands, "settings": settings},
}


def render(text: str, sections: dict) -> str:
    """``text`` with each generated section rewritten; a section's markers must be there."""
    for name, make in sections.items():
        begin, end = BEGIN.format(name=name), END.format(name=name)
        found = re.search(re.escape(begin) + r"\n.*?" + re.escape(end), text, re.DOTALL)
        if not found:
            raise SystemExit(f"docs/generate.py: the markers of section {name!r} are missing:\n{begin}\n{end}")
        text = f"{text[:found.start()]}{begin}\n{make()}\n{end}{text[found.end():]}"
    return text


def stale() -> list[str]:
    """The pages whose generated sections differ from what the sources give now."""
    return [page for page, sections in PAGES.items()
            if render((ROOT / page).read_text(), sections) != (ROOT / page).read_text()]


def main(argv: list[str]) -> int:
    if argv == ["--check"]:
        pages = stale()
        for page in pages:
            print(f"{page}: a generated section is stale; run python docs/generate.py and commit", file=sys.stderr)
        return 1 if pages else 0
    if argv:
        print(__doc__, file=sys.stderr)
        return 2
    for page, sections in PAGES.items():
        path = ROOT / page
        path.write_text(render(path.read_text(), sections))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

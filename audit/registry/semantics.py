"""Rules JSON Schema cannot say: unique names, ranged dims, index bounds, target formats."""

from __future__ import annotations

import math

import datetime
import functools
import re
import unicodedata

from typing import Any

from audit.catalog.checks import CATALOG
from audit.core.errors import Problem
from audit.registry.model import DEFAULT_KIND, FLOAT_DTYPES, EntryKind
from audit.registry.schema import describe
from audit.registry.yamltree import Located, dotted

MODULE_TARGET = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
OP_TARGET = re.compile(r"^[A-Za-z_]\w*::[A-Za-z_]\w*(\.[A-Za-z_]\w*)?$")
SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: What a rule finds: each problem's key path inside the entry, and what was expected there.
Found = list[tuple[tuple[str | int, ...], str]]


def registry_problems(entries: list[dict[str, Any]], located: Located, file: str) -> list[Problem]:
    """Problems across entries: duplicate names."""
    seen: dict[str, int] = {}
    problems: list[Problem] = []
    for index, entry in enumerate(entries):
        name = entry.get("name")
        if not isinstance(name, str):  # the schema has said what a name must be
            continue
        if name in seen:
            path = ("entries", index, "name")
            first = located.where(("entries", seen[name], "name"))[0]
            problems.append(Problem(file, *located.where(path), dotted(path),
                                    f"duplicate name {name!r} (first used on line {first})"))
        seen.setdefault(name, index)
    return problems


def entry_problems(entry: dict[str, Any], index: int, located: Located, file: str) -> list[Problem]:
    """Every rule below, applied to one merged entry."""
    base = ("entries", index)
    found: Found = []
    for rule in (_required, _owner, _target, _dims, _batch, _indices, _domains, _sparse, _constants, _expect,
                 _proxy):
        try:
            found += rule(entry)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError):
            continue  # a value of the wrong type: the schema has said what it must be
    return [Problem(file, *located.where(base + p), dotted(base + p), msg) for p, msg in found]


def _owner(entry: dict[str, Any]) -> Found:
    owners = entry.get("owner")
    owners = owners if isinstance(owners, list) else [owners] if isinstance(owners, str) else []
    bad = [o for o in owners if isinstance(o, str) and _bad_handle(o)]
    if not bad:
        return []
    why = ("a placeholder `audit scan --write` left: fill it in" if bad[0].startswith("<owner")
           else "no spaces, control characters or markup")
    return [(("owner",), f"expected a team or person handle such as @ml-kernels, got {describe(bad[0])} ({why})")]


@functools.lru_cache(maxsize=1024)
def _bad_handle(owner: str) -> bool:
    """Blank, or holding a character no handle has; once per handle (a registry names a few teams many times)."""
    return not owner.strip() or any(_not_in_handle(c) for c in owner)


def _not_in_handle(char: str) -> bool:
    """Whitespace, control characters and markup have no place in a handle (and would reach reports)."""
    return char.isspace() or char in "<>`|" or unicodedata.category(char)[0] == "C"


def _required(entry: dict[str, Any]) -> Found:
    model = entry.get("kind") == EntryKind.MODEL
    found: Found = [((), f"missing required key {key!r} (set it on the entry or in defaults)")
                    for key in ("owner",) + (() if model else ("inputs",)) if key not in entry]
    if not model and entry.get("inputs") == []:
        found.append((("inputs",), "expected at least one input (only kind model takes its inputs from make_batch)"))
    if "training" in entry and not model:
        found.append((("training",), f"expected no training settings for kind {entry.get('kind', DEFAULT_KIND)} "
                                     "(they are for kind model)"))
    return found


def _target(entry: dict[str, Any]) -> Found:
    if "target" not in entry:
        return []  # the schema names the missing key
    kind, target = entry.get("kind", DEFAULT_KIND), entry["target"]
    if kind == EntryKind.OP and not OP_TARGET.match(target):
        return [(("target",), f"expected 'namespace::name[.overload]' for kind op, got {target!r}")]
    if kind != EntryKind.OP and not MODULE_TARGET.match(target):
        return [(("target",), f"expected 'module:Qualname' for kind {kind}, got {target!r}")]
    return []


def _dims(entry: dict[str, Any]) -> Found:
    used = {s for spec in entry.get("inputs", []) if "shape" in spec
            for s in spec["shape"] if isinstance(s, str)}
    if "dims" not in entry:
        return []
    ranged = entry["dims"]
    problems: Found = [(("inputs",), f"dim {name!r} is used in a shape but not ranged in dims")
                       for name in sorted(used - set(ranged))]
    problems += [(("dims", name), f"dim {name!r} is ranged but no input shape uses it")
                 for name in sorted(set(ranged) - used)]
    problems += [(("dims", name), f"expected [low, high] with low <= high, got {list(r)}")
                 for name, r in ranged.items() if r[0] > r[1]]
    return problems


def _batch(entry: dict[str, Any]) -> Found:
    used = {s for spec in entry.get("inputs", []) if "shape" in spec for s in spec["shape"] if isinstance(s, str)}
    name = entry.get("batch")
    if name is None or name in used:
        return []
    return [(("batch",), f"expected a symbolic dim used in an input's shape ({', '.join(sorted(used)) or 'none'}), "
                         f"got {name!r}")]


def _indices(entry: dict[str, Any]) -> Found:
    inputs = entry.get("inputs", [])
    problems: Found = []
    for key in ("mutates", "views"):
        for i, position in enumerate(entry.get(key, [])):
            if position >= len(inputs) or "shape" not in inputs[position]:
                problems.append(((key, i), f"expected the index of a tensor input (0..{len(inputs) - 1}), "
                                           f"got {position}"))
    return problems


def _domains(entry: dict[str, Any]) -> Found:
    return [(("inputs", i, "domain"), f"expected [low, high] with low < high, got {spec['domain']}")
            for i, spec in enumerate(entry.get("inputs", []))
            if "domain" in spec and not spec["domain"][0] < spec["domain"][1]]


def _constants(entry: dict[str, Any]) -> Found:
    """A constant input (``constant:``) is dense and drawn from nothing (no domain, kinks or layout); a list of values
    needs a fixed shape that holds exactly as many."""
    problems: Found = []
    for i, spec in enumerate(entry.get("inputs", [])):
        if not isinstance(spec, dict) or "constant" not in spec:
            continue
        path = ("inputs", i)
        drawn = [key for key in ("domain", "kinks", "layout", "density") if key in spec]
        if drawn:
            problems.append((path + (drawn[0],), f"expected no {drawn[0]} on a constant input (its values are "
                             "given, not drawn); drop one of the two"))
        values, shape = spec["constant"], spec.get("shape", [])
        if not isinstance(values, list):
            continue
        if any(isinstance(size, str) for size in shape):
            problems.append((path + ("constant",), f"expected a fixed shape for a list of {len(values)} values, got "
                             f"{shape}: give the sizes as numbers, or one number to fill the shape"))
        elif len(values) != math.prod(shape):
            problems.append((path + ("constant",), f"expected {math.prod(shape)} values for shape {shape}, got "
                             f"{len(values)}"))
    return problems


def _sparse(entry: dict[str, Any]) -> Found:
    """A sparse input (``layout:``) is floating, has dims to index (CSR: exactly 2); density needs a layout."""
    problems: Found = []
    for i, spec in enumerate(entry.get("inputs", [])):
        layout, path = spec.get("layout"), ("inputs", i)
        if layout is None and "density" in spec:
            problems.append((path + ("density",), "expected density only with a sparse layout "
                             "(layout: sparse_coo or sparse_csr); a dense input has every element"))
        if layout is None:
            continue
        if spec.get("dtype") not in (None,) + FLOAT_DTYPES:
            problems.append((path + ("layout",), f"expected a floating input for a sparse layout (its gradient is "
                             f"checked with masked semantics), got dtype {spec['dtype']}; drop layout or dtype"))
        ndim = len(spec.get("shape", ()))
        if layout == "sparse_csr" and ndim != 2:
            problems.append((path + ("layout",), f"expected a 2-D shape for sparse_csr (rows and columns), got "
                             f"{ndim} dim{'s' if ndim != 1 else ''}; use sparse_coo for other shapes"))
        if layout == "sparse_coo" and ndim == 0:
            problems.append((path + ("layout",), "expected at least 1 dim for sparse_coo, got a 0-d shape"))
    return problems


def _expect(entry: dict[str, Any]) -> Found:
    if not entry.get("expect"):  # most entries waive nothing: no set of every check name to build for them
        return []
    known = set(CATALOG) | set(entry.get("checks", []))
    problems: Found = []
    for i, waiver in enumerate(entry.get("expect", [])):
        if waiver["check"] not in known:
            problems.append((("expect", i, "check"), f"expected a check name ({', '.join(CATALOG)} "
                             f"or one listed in checks), got {waiver['check']!r}"))
        if "until" in waiver and not _is_date(waiver["until"]):
            problems.append((("expect", i, "until"), f"expected a real date YYYY-MM-DD, got {waiver['until']!r}"))
    return problems


def _proxy(entry: dict[str, Any]) -> Found:
    """A proxy or a declared VJP is for an entry called on drawn tensors (a model's training has no gradient of its
    own to intend), one of them at most (each says what the intended gradient is); ``proxy_modes`` is for a module
    entry with a proxy (only a module has train and eval modes)."""
    kind = entry.get("kind", DEFAULT_KIND)
    problems: Found = []
    for key in ("proxy", "vjp"):
        if key in entry and kind == EntryKind.MODEL:
            problems.append(((key,), f"expected no {key} for kind model (declare it on the entry of the Function "
                                     "whose backward is intended)"))
    if "proxy" in entry and "vjp" in entry:
        problems.append((("vjp",), f"expected proxy or vjp, not both (proxy {entry['proxy']!r}: the intended gradient "
                                   "is that function's autograd gradient; vjp: a rule of its own): keep one"))
    if "proxy_modes" in entry and (kind != EntryKind.MODULE or "proxy" not in entry):
        problems.append((("proxy_modes",), f"expected proxy_modes only on a kind module entry with a proxy, got kind "
                                           f"{kind}{'' if 'proxy' in entry else ' without a proxy'}"))
    return problems


def _is_date(text: str) -> bool:
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True

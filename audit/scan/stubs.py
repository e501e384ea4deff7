"""Registry stubs for unregistered findings, inferred from the calls seen, appended to the registry text
without disturbing its comments or order."""

from __future__ import annotations

import datetime
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from audit.core.contract import DEVICE_ORDER, DTYPE_ORDER
from audit.scan import codeowners, probe
from audit.scan.findings import Finding

#: What the scan writes where no CODEOWNERS rule names an owner: ``audit validate`` refuses it.
PLACEHOLDER = "<owner: fill me in>"
SYMBOLS = "BNMKLTHWCDEFGPQRSUVXYZ"
#: Symbolic dims get at most this many sizes above the smallest seen: enough variety, cheap checks.
SPAN = 4


def stubs(findings: list[Finding], registry, *, root: Path, load: list[str]) -> list[dict]:
    """One entry per finding, named uniquely against the registry and each other. Each may carry ``_notes`` (what
    its comments say: :mod:`audit.scan.probe`) and ``_why`` (why each inferred value was chosen: ``--explain``),
    which :func:`render` writes as comments and never as keys."""
    taken = {e.name for e in registry.entries} if registry else set()
    rules = codeowners.load(root)
    made = []
    for finding in findings:
        name = _unique(_snake(finding.target), taken)
        taken.add(name)
        owner = codeowners.owners(rules, _relative(finding.source, root)) if finding.source else []
        entry: dict[str, Any] = {"name": name, "owner": owner[0] if len(owner) == 1 else owner or PLACEHOLDER,
                                 "kind": finding.kind, "target": finding.target}
        if finding.kind == "op" and load:
            entry["load"] = list(load)
        why: list[str] = []
        apply = _apply(finding)
        inputs, dims = infer(finding, why, apply)
        entry["inputs"] = inputs
        if dims:
            entry["dims"] = dims
        seen = {a[2] for c in finding.calls for a in c.args
                if a[0] == "tensor" and a[2].startswith(("float", "bfloat"))}
        devices = sorted({a[4] for c in finding.calls for a in c.args if a[0] == "tensor"})
        # float64 is claimed beside what was seen: gradients are judged by finite differences in it.
        dtypes = [d for d in DTYPE_ORDER if d in seen | {"float64"}]
        entry["supports"] = {"dtypes": dtypes, "devices": [d for d in DEVICE_ORDER if d in devices] or ["cpu"]}
        why.append(f"supports.dtypes {dtypes}: the dtypes seen ({', '.join(sorted(seen)) or 'none'}) and float64, in "
                   "which gradients are judged")
        entry["_notes"] = probe.notes(finding, apply) if apply is not None else []
        entry["_why"] = why
        made.append(entry)
    return made


def model_stub(spec: str, registry, taken: set, *, root: Path, source: str = "") -> dict | None:
    """A ``kind: model`` entry for the scanned factory ``spec`` itself (the layer above its operators: train_step,
    accumulation), named apart from the registry's and the ``taken`` names, unless the registry has one naming it."""
    if registry and any(e.kind == "model" and e.target == spec for e in registry.entries):
        return None
    taken = taken | ({e.name for e in registry.entries} if registry else set())
    module = spec.partition(":")[0]
    owner = codeowners.owners(codeowners.load(root), _relative(source, root)) if source else []
    return {"name": _unique(_snake(module.rsplit(".", 1)[-1] + "_model"), taken),
            "owner": owner[0] if len(owner) == 1 else owner or PLACEHOLDER, "kind": "model", "target": spec,
            "_why": [f"kind model: {spec} returns (model, make_batch, loss); the model's own entry trains it a few "
                     "steps (train_step, accumulation, compile where claimed)"]}


def _apply(finding: Finding):
    """The recorded Function's ``apply``, where the scan ran it and its target can be imported; else None."""
    if finding.kind != "function" or not finding.sample or not importable(finding):
        return None
    from audit.runtime.target import TargetError, import_object

    try:
        return import_object(finding.target).apply
    except (TargetError, AttributeError):
        return None


#: A class made inside a function: its qualname is no import path.
LOCAL = ".<locals>."


def importable(finding: Finding) -> bool:
    """Whether a registry can name the finding's target (a class made inside a function cannot)."""
    return LOCAL not in finding.target


def commented(entries: list[dict], findings: list[Finding]) -> str:
    """For targets made inside a factory: the stub as YAML comments, with what to write to audit it.
    A registry never gets an entry it cannot import."""
    blocks = []
    for entry, finding in zip(entries, findings):
        module, _, qualname = finding.target.partition(":")
        factory = qualname.split(LOCAL)[0]
        wrapper = f"{entry['name']}_call"
        seen = f" (called at {finding.sites[0]})" if finding.sites else ""
        stub = dict(_keys(entry), kind="callable", target=f"YOUR_MODULE:{wrapper}")
        body = yaml.safe_dump([stub], sort_keys=False, default_flow_style=None, width=100, allow_unicode=True)
        blocks.append("\n".join([
            f"# {finding.target}{seen} is made inside {module}.{factory}() and cannot be imported by name.",
            "# To audit it, write a function that makes it and applies it, e.g. in your package or checks/:",
            f"#     def {wrapper}(*tensors):",
            f"#         return {module}.{factory}(...).apply(*tensors)"
            "  # the factory's arguments, as the model uses them",
            "# then add this entry under entries (target: that function), fill in the owner and check the inputs:",
            *(f"#   {line}" for line in body.rstrip("\n").splitlines())]))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def infer(finding: Finding, why: list | None = None, apply=None) -> tuple[list, dict]:
    """Inputs (symbolic dims where sizes varied) and dim ranges, from the calls seen; ``why`` receives the reason for
    each value; with ``apply`` (the Function, and ``finding.sample`` a call of it), a domain is widened to both signs
    where the values seen come close to 0 and the Function is finite there (:func:`widened`)."""
    why = [] if why is None else why
    arity = Counter(len(c.args) for c in finding.calls).most_common(1)[0][0]
    calls = [c for c in finding.calls if len(c.args) == arity]
    positions: dict[tuple, list] = {}
    for i in range(arity):
        first = calls[0].args[i]
        if first[0] == "tensor" and all(c.args[i][0] == "tensor" and len(c.args[i][1]) == len(first[1]) for c in calls):
            for axis in range(len(first[1])):
                positions[(i, axis)] = [c.args[i][1][axis] for c in calls]
    names: dict[tuple, str] = {}
    for sizes in positions.values():
        if len(set(sizes)) > 1 and tuple(sizes) not in names:
            names[tuple(sizes)] = (SYMBOLS[len(names) % len(SYMBOLS)]
                                   + ("" if len(names) < len(SYMBOLS) else str(len(names))))
    inputs, dims = [], {}
    for i in range(arity):
        first = calls[0].args[i]
        if first[0] != "tensor":
            inputs.append({"value": first[2] if first[2] is not None or first[1] == "None" else first[1]})
            continue
        shape = []
        for axis in range(len(first[1])):
            sizes = positions[(i, axis)]
            if len(set(sizes)) == 1:
                shape.append(sizes[0])
            else:
                symbol = names[tuple(sizes)]
                shape.append(symbol)
                if symbol not in dims:
                    why.append(f"dims.{symbol} {[min(sizes), min(max(sizes), min(sizes) + SPAN)]}: sizes seen "
                               f"{sorted(set(sizes))}, at most {SPAN} above the smallest")
                dims[symbol] = [min(sizes), min(max(sizes), min(sizes) + SPAN)]
        spec: dict[str, Any] = {"shape": shape}
        low = min(c.args[i][6] for c in calls)
        high = max(c.args[i][7] for c in calls)
        if first[2].startswith(("float", "bfloat")):
            spec["domain"] = widened(_domain(low, high), i, finding, apply, why)
        else:
            spec.update(dtype=first[2], domain=[math.floor(low), math.ceil(high)], requires_grad=False)
        inputs.append(spec)
    return inputs, dims


def render(entries: list[dict], indent: int) -> str:
    """Block YAML for the entries, at the registry's indentation, under a comment saying what to do."""
    today = datetime.date.today().isoformat()
    pad = " " * indent
    lines = [f"{pad}# Added by `audit scan --write` on {today}: fill in each owner, then check the inputs",
             f"{pad}# (inferred from the calls seen) and the claims before committing."]
    for entry in entries:
        for note in entry.get("_notes", ()):
            first, *rest = _wrapped(f"NOTE {entry['name']}: {note}", 100 - indent)
            lines += [f"{pad}# {first}"] + [f"{pad}#   {line}" for line in rest]
        text = yaml.safe_dump([_keys(entry)], sort_keys=False, default_flow_style=None, width=100, allow_unicode=True)
        lines += [pad + line for line in text.rstrip("\n").splitlines()]
    return "\n".join(lines) + "\n"


def _keys(entry: dict) -> dict:
    """The entry as the registry holds it: without the scan's own ``_notes`` and ``_why``."""
    return {k: v for k, v in entry.items() if not k.startswith("_")}


def _wrapped(text: str, width: int) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def append(text: str, entries: list[dict]) -> str:
    """``text`` (a registry) with ``entries`` added at the end of its ``entries`` list, comments kept."""
    root = yaml.compose(text)
    node = next((value for key, value in root.value if key.value == "entries"), None) if root else None
    if node is None or not isinstance(node, yaml.SequenceNode):
        raise ValueError("the registry has no entries list to append to")
    if node.flow_style or not node.value:
        indent = 2
        start, end = node.start_mark.index, node.end_mark.index
        return text[:start].rstrip(" ") + "\n" + render(entries, indent) + text[end:].lstrip("\n")
    indent = node.start_mark.column
    lines = text.splitlines(keepends=True)
    last = node.value[-1].end_mark.line + (0 if node.value[-1].end_mark.column == 0 else 1)
    while last > 0 and not lines[last - 1].strip():
        last -= 1
    body = "".join(lines[:last])
    if not body.endswith("\n"):
        body += "\n"
    return body + "\n" + render(entries, indent) + "".join(lines[last:])


def widened(domain: list[float], position: int, finding: Finding, apply, why: list) -> list[float]:
    """``domain`` (the values seen over every call, to 0.01) made ``[-m, m]`` (m its largest magnitude) where it
    excludes 0 and its end nearer 0 lies within one width of it: values that come close to 0 cross it in use (a
    membrane potential seen at [-1.9, -0.4] is positive a moment later), and a threshold at 0 must be drawn on both
    sides. Kept when the Function, given the values seen with the other sign, returns a value that is not finite
    (a log, a square root: the domain is the function's), or when it cannot be asked."""
    low, high = domain
    said = f"inputs.{position}.domain"
    if low <= 0 <= high or min(abs(low), abs(high)) > high - low:
        why.append(f"{said} {domain}: the values seen over {len(finding.calls)} call(s)")
        return domain
    if apply is None or not _finite_mirrored(apply, finding.sample, position):
        why.append(f"{said} {domain}: the values seen over {len(finding.calls)} call(s); not widened to both signs "
                   "(the Function is not finite at the values seen with the other sign, or was not run here)")
        return domain
    m = max(abs(low), abs(high))
    why.append(f"{said} {[-m, m]}: the values seen, {domain}, come within one width of 0, and the Function is finite "
               "at them with the other sign: both signs drawn")
    return [-m, m]


def _finite_mirrored(apply, sample: tuple, position: int) -> bool:
    """Whether ``apply`` returns finite values on ``sample`` with argument ``position`` negated."""
    import torch

    args = list(sample)
    if position >= len(args) or not isinstance(args[position], torch.Tensor):
        return False
    args[position] = -args[position]
    try:
        with torch.no_grad():
            result = apply(*args)
    except Exception:
        return False
    items = result if isinstance(result, (tuple, list)) else (result,)
    return all(bool(torch.isfinite(t).all()) for t in items if isinstance(t, torch.Tensor) and t.is_floating_point())


def _domain(low: float, high: float) -> list[float]:
    if not (math.isfinite(low) and math.isfinite(high)):
        return [-1.0, 1.0]
    if high - low < 1e-6:
        low, high = low - 1, high + 1
    return [math.floor(low * 100) / 100, math.ceil(high * 100) / 100]


def _snake(target: str) -> str:
    last = re.split(r"[:.]", target)[-1].lstrip("_")
    return re.sub(r"(?<!^)(?=[A-Z])", "_", last).lower() or "entry"


def _unique(name: str, taken: set) -> str:
    candidate, n = name, 2
    while candidate in taken:
        candidate, n = f"{name}_{n}", n + 1
    return candidate


def _relative(source: str, root: Path) -> str:
    try:
        return Path(source).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return Path(source).as_posix()

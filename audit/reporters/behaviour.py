"""A :class:`~audit.behaviour.compare.BehaviourDiff` as lines of text or Markdown: the layers first (how many entries
moved, and how), what changed in the numerics settings, then each class of change with its entries."""

from __future__ import annotations

from audit.behaviour.compare import CLASSES, GATING, TITLES, BehaviourDiff, Moved
from audit.reporters.common import markdown_text


def summary(b: BehaviourDiff) -> list[str]:
    """One line per layer (``operators: 7 compared, 2 moved (values 1, cost 1)``), or why nothing was compared."""
    if b.note:
        return [b.note]
    lines = []
    for layer in b.layers:
        moved = sum(layer.moved.values())
        how = ", ".join(f"{kind} {count}" for kind, count in layer.moved.items())
        skipped = f", {layer.not_compared} not compared" if layer.not_compared else ""
        lines.append(f"{layer.name}: {layer.compared} compared{skipped}, "
                     + (f"moved: {how}" if moved else "nothing moved"))
    return lines or ["behaviour: no entry is in both records"]


def text_lines(b: BehaviourDiff) -> list[str]:
    """The classes of change, for a terminal."""
    lines = []
    if b.numerics:
        lines += ["", "Numerics settings changed:"] + [f"  {k}: {a} -> {c}" for k, a, c in b.numerics]
    for kind in CLASSES:
        changes = b.of(kind)
        if changes:
            lines += ["", f"{TITLES[kind]}:"]
            for m in changes:
                lines.append(f"  {_where(m)}: {m.detail}{_gate(m)}")
                if m.repro:
                    lines.append(f"    replay: {m.repro}")
    if b.notes:
        lines += ["", "Behaviour notes:"] + [f"  {n}" for n in b.notes]
    return lines


def markdown_lines(b: BehaviourDiff) -> list[str]:
    """The classes of change, as GitHub-flavoured Markdown."""
    lines = ["", "### Behaviour, layer by layer", ""] + [f"- {markdown_text(s)}" for s in summary(b)]
    if b.numerics:
        lines += ["", "**Numerics settings changed**", "", "| setting | old | new |", "|---|---|---|"]
        lines += [f"| {k} | {markdown_text(str(a))} | {markdown_text(str(c))} |" for k, a, c in b.numerics]
    for kind in CLASSES:
        changes = b.of(kind)
        if changes:
            lines += ["", f"### {TITLES[kind]}", "", "| entry | where | change | gates | replay |",
                      "|---|---|---|---|---|"]
            lines += [f"| {m.entry} | {markdown_text(m.what)} | {markdown_text(m.detail)} | "
                      f"{'yes' if m.gates else 'no'} | {f'`{m.repro}`' if m.repro else ''} |" for m in changes]
    if b.notes:
        lines += ["", "<details><summary>Behaviour notes</summary>", ""] + [f"- {markdown_text(n)}" for n in b.notes]
        lines += ["", "</details>"]
    return lines


def counts(b: BehaviourDiff) -> str:
    """``2 values, 1 cost`` for the headline ("" when nothing moved)."""
    return ", ".join(f"{len(b.of(kind))} {kind}" for kind in CLASSES if b.of(kind))


def _where(m: Moved) -> str:
    return f"{m.entry} ({m.layer}) {m.what}"


def _gate(m: Moved) -> str:
    if m.gates:
        return "" if m.kind in GATING else " [gates: beyond the chosen slowdown]"
    return " [does not gate]" if m.kind in GATING else ""

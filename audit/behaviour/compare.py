"""Two environments' behaviour compared: values, training, checkpoints, compile and cost, layer by layer.

A recorded value that moved by more than its allowance (:meth:`~audit.behaviour.values.Value.allowance`: the two
environments' own errors in that dtype, plus a few roundings) is a regression of behaviour and gates; one that moved
less is not listed. A model's trajectory is judged step by step the same way. A module's or model's state dict that
another environment could not load strictly gates with the keys. Compile facts (from the two matrices' compile
cells) and cost (timed on the fixed cases) are listed, never gating unless a slowdown factor is chosen.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterator
from dataclasses import dataclass

from audit.behaviour.store import Record
from audit.behaviour.values import LAYER_ORDER, LAYERS, EntryRecord, Value

#: The classes of behaviour change, in the order a reader meets them; the first three gate.
CLASSES = ("values", "training", "checkpoint", "compile", "cost", "environment")
GATING = ("values", "training", "checkpoint")
TITLES = {
    "values": "Values moved beyond their own error: outputs, gradients, tangents, second-order products",
    "training": "Training trajectories moved beyond their own error: losses and gradient norms per step",
    "checkpoint": "Checkpoints: state dicts that do not load, or load and compute something else",
    "compile": "Compile: graph breaks, recompiles or compile time grew (does not gate; a broken claim does)",
    "cost": "Cost: a timed forward and backward slower or faster beyond the noise (does not gate by default)",
    "environment": "Behaviour that depends on the environment: module values computed at import",
}
#: A cost is each side's fastest sample (the machine's best case: load only ever slows a sample down). A change is
#: listed when its factor is beyond both the noise band measured on each side (NOISE_BANDS times the larger spread
#: of samples over the fastest) and MIN_FACTOR: the band within one run misses the load that differs between two
#: runs (identical code measured 0.46x to 2.2x apart by the median on this project's 2-core machine, docs/upgrade.md).
NOISE_BANDS, MIN_FACTOR = 3.0, 2.0
#: A compile time is listed when it grew by more than this factor, and by more than COMPILE_SECONDS (the compile check
#: pays Dynamo's start-up untimed first, :func:`audit.toolkit.dynamo.warm`; what remains moves with load by a second).
COMPILE_FACTOR, COMPILE_SECONDS = 2.0, 2.0


@dataclass(frozen=True)
class Moved:
    """One change of behaviour of one entry: its class, where (``what``), by how much (``detail``), whether it
    gates, and the command that replays it in the new environment against the old record."""

    kind: str
    entry: str
    layer: str
    what: str
    detail: str
    gates: bool
    repro: str = ""
    owners: tuple[str, ...] = ()

    def to_json(self) -> dict:
        """Plain data for ``audit diff --format json``."""
        return {"class": self.kind, "entry": self.entry, "layer": self.layer, "what": self.what, "detail": self.detail,
                "gates": self.gates, "repro": self.repro, "owner": list(self.owners)}


@dataclass(frozen=True)
class Layer:
    """One layer's count: entries compared, and how many moved in each class."""

    name: str
    compared: int
    moved: dict[str, int]
    not_compared: int = 0


@dataclass(frozen=True)
class BehaviourDiff:
    """Everything that moved between two records; ``note`` says why nothing was compared, when nothing was."""

    moved: tuple[Moved, ...] = ()
    numerics: tuple[tuple[str, str | None, str | None], ...] = ()
    layers: tuple[Layer, ...] = ()
    notes: tuple[str, ...] = ()
    note: str = ""

    def of(self, kind: str) -> tuple[Moved, ...]:
        """The changes of one class."""
        return tuple(m for m in self.moved if m.kind == kind)

    @property
    def regressed(self) -> bool:
        """Whether any change gates."""
        return any(m.gates for m in self.moved)

    def to_json(self) -> dict:
        """Plain data for ``audit diff --format json``."""
        return {"note": self.note, "notes": list(self.notes),
                "numerics_changed": {k: {"old": a, "new": b} for k, a, b in self.numerics},
                "layers": [{"layer": x.name, "compared": x.compared, "not_compared": x.not_compared,
                            "moved": dict(x.moved)} for x in self.layers],
                "changes": {kind: [m.to_json() for m in self.of(kind)] for kind in CLASSES}}


@dataclass(frozen=True)
class Options:
    """How the comparison is run: the command that replays an entry (``{entry}`` and ``{dtype}`` filled in), the
    owners of each entry, and the slowdown factor that gates (None: cost never gates)."""

    repro: str = ""
    owners: dict[str, tuple[str, ...]] | None = None
    slowdown: float | None = None


def compare(old: Record | None, new: Record | None, compile_cells: dict | None = None,
            options: Options = Options()) -> BehaviourDiff:
    """``new`` against ``old``; ``compile_cells``: (entry, dtype, device) -> (entry kind, old metrics, new metrics)
    of the two matrices' compile cells."""
    compiled = tuple(_compile(compile_cells or {}, options))
    if old is None or new is None:
        side = "either" if old is None and new is None else "the old" if old is None else "the new"
        return BehaviourDiff(moved=compiled, note=f"behaviour not compared: {side} matrix has no behaviour record "
                                                  "(record both with audit run --record, or --profile upgrade)")
    moved: list[Moved] = list(compiled)
    notes = []
    if old.registry_sha256 != new.registry_sha256:
        notes.append("the two records are of registries that differ: entries are matched by name")
    if old.seed != new.seed:
        notes.append(f"the records were made with other seeds ({old.seed}, {new.seed}): their fixed cases differ, "
                     "and values are not compared")
    compared: dict[str, bool] = {}
    for name, after in new.entries.items():
        before = old.entries.get(name)
        if before is None:
            continue
        found = list(_entry(old, new, before, after, options, same_cases=old.seed == new.seed))
        compared[name] = not (before.error or after.error)
        moved += found
        notes += [f"{name}: {n}" for n in _entry_notes(before, after)]
    keys = sorted(set(old.numerics) | set(new.numerics))
    numerics = tuple((k, old.numerics.get(k), new.numerics.get(k)) for k in keys
                     if old.numerics.get(k) != new.numerics.get(k))
    return BehaviourDiff(tuple(moved), numerics, _layers(new, compared, moved), tuple(notes))


def _entry(old: Record, new: Record, before: EntryRecord, after: EntryRecord, options: Options,
           same_cases: bool) -> Iterator[Moved]:
    layer = LAYERS.get(after.kind, "operators")
    owners = (options.owners or {}).get(after.name, ())

    def moved(kind: str, what: str, detail: str, gates: bool, dtype: str = "") -> Moved:
        repro = options.repro.format(entry=after.name) + (f" --dtype {dtype}" if dtype else "") \
            if options.repro and gates else ""
        return Moved(kind, after.name, layer, what, detail, gates, repro, owners)

    if before.error or after.error:
        return
    weights_moved = yield from _checkpoints(old, new, before, after, moved)
    yield from _constants(before, after, moved)
    yield from _costs(before, after, options, moved)
    if not (same_cases and before.values and after.values):
        return
    tensors_old, tensors_new = old.tensors(before.name), new.tensors(after.name)
    from_checkpoint = {v.key.removeprefix("checkpoint/"): v for v in after.values if v.kind == "checkpoint"}
    if weights_moved and not from_checkpoint:
        return  # said in the checkpoint change: outputs from other weights say nothing of the computation
    olds = {v.key: v for v in before.values}
    for kind in ("values", "training"):
        worst: dict[tuple[str, str], list] = {}
        for value in after.values:
            if value.kind == "checkpoint" or _class(value) != kind or value.key not in olds:
                continue
            if weights_moved and value.key not in from_checkpoint:
                continue
            here = from_checkpoint.get(value.key, value) if weights_moved else value
            key = here.key
            found = _change(olds[value.key], here, tensors_old[value.key], tensors_new[key])
            if found is not None:
                worst.setdefault((value.dtype, value.device), []).append(found)
        for (dtype, device), changes in worst.items():
            changes.sort(key=lambda c: -c[0])
            _, text = changes[0]
            more = f"; {len(changes) - 1} more value{'s' * (len(changes) != 2)} moved in this cell" \
                if len(changes) > 1 else ""
            source = "from the old checkpoint loaded here: " if weights_moved else ""
            yield moved(kind, f"{dtype}, {device}", source + text + more, True, dtype)


def _class(value: Value) -> str:
    return "training" if value.kind in ("loss", "grad_norm") else "values"


def _change(old: Value, new: Value, a, b) -> tuple[float, str] | None:
    """How far ``new`` moved from ``old`` beyond its allowance: (ratio to the allowance, the message), or None."""
    import torch

    where = new.label if new.kind in ("loss", "grad_norm") else f"{new.label} (on {new.case})"
    if tuple(a.shape) != tuple(b.shape) or a.dtype != b.dtype:
        return math.inf, (f"{where}: shape or dtype changed: {list(a.shape)} {_dtype(a)} -> {list(b.shape)} "
                          f"{_dtype(b)}")
    if a.numel() == 0:
        return None
    wide = torch.complex128 if a.is_complex() else torch.float64
    x, y = a.to(wide) if (a.is_floating_point() or a.is_complex()) else a.double(), \
        b.to(wide) if (b.is_floating_point() or b.is_complex()) else b.double()
    both_nan = torch.isnan(x) & torch.isnan(y) if x.is_floating_point() or x.is_complex() else torch.zeros_like(x,
                                                                                                                dtype=bool)
    difference = (y - x).abs().masked_fill(both_nan, 0).nan_to_num(nan=math.inf)
    largest = float(difference.max())
    allowance = old.allowance(new)
    if largest <= allowance:
        return None
    index = tuple(int(i) for i in torch.unravel_index(torch.argmax(difference), tuple(difference.shape))) \
        if difference.dim() else ()
    at = f" at {list(index)}" if index else ""
    own = (f"allowance {allowance:.3g}: the old and new errors in {new.dtype} {old.error:.2g} and {new.error:.2g}, "
           f"plus 4 roundings at scale {max(old.scale, new.scale):.3g}") if allowance else "compared exactly"
    text = (f"{where}: max |new - old| = {largest:.3g}{at} (old {_item(x, index)}, new {_item(y, index)}) > {own}")
    return (largest / allowance if allowance else math.inf), text


def _item(tensor, index) -> str:
    value = tensor[index] if index else tensor
    return f"{complex(value):.6g}" if tensor.is_complex() else f"{float(value):.8g}"


def _dtype(tensor) -> str:
    return str(tensor.dtype).removeprefix("torch.")


def _checkpoints(old: Record, new: Record, before: EntryRecord, after: EntryRecord, moved):
    """A state dict's keys, shapes and dtypes against the old one (a strict load would fail), the old checkpoint's
    load here (``--against``), and its initial weights; returns whether those weights moved."""
    if not before.state:
        return False
    missing = sorted(set(before.state) - set(after.state))
    unexpected = sorted(set(after.state) - set(before.state))
    reshaped = sorted(k for k in set(before.state) & set(after.state) if before.state[k] != after.state[k])
    if missing or unexpected or reshaped:
        parts = [f"missing keys {missing}" if missing else "", f"unexpected keys {unexpected}" if unexpected else "",
                 "; ".join(f"{k}: {before.state[k]} -> {after.state[k]}" for k in reshaped)]
        yield moved("checkpoint", "state dict", "a strict load of the old state dict fails here: "
                    + "; ".join(p for p in parts if p), True)
    if after.load:
        yield moved("checkpoint", "strict load of the old checkpoint", after.load, True)
    if missing or unexpected or reshaped:
        return True
    import torch

    a, b = old.tensors(before.name), new.tensors(after.name)
    differ = [k for k in before.state if not torch.equal(a[f"state/{k}"], b[f"state/{k}"])]
    if differ:
        hint = "" if any(v.kind == "checkpoint" for v in after.values) else \
            "; run the new side with --against OLD_OUT to compare its computation from the old weights"
        yield moved("checkpoint", "initial weights", f"built from the same seed, {len(differ)} of {len(before.state)} "
                    f"tensors differ ({', '.join(differ[:3])}{'...' if len(differ) > 3 else ''}): torch's "
                    f"initialisation or random stream changed; a saved checkpoint is unaffected{hint}", False)
    return bool(differ)


def _constants(before: EntryRecord, after: EntryRecord, moved) -> Iterator[Moved]:
    changed = [f"{k} {before.constants[k]} -> {after.constants[k]}" for k in sorted(after.constants)
               if k in before.constants and before.constants[k] != after.constants[k]]
    if changed and before.digest == after.digest:
        yield moved("environment", "module values computed at import", "; ".join(changed) + " (the source text is "
                    "the same: the value depends on the environment, such as torch's version)", False)


def _costs(before: EntryRecord, after: EntryRecord, options: Options, moved) -> Iterator[Moved]:
    olds = {(c.dtype, c.device): c for c in before.cost}
    for cost in after.cost:
        was = olds.get((cost.dtype, cost.device))
        if was is None or not was.seconds or not cost.seconds:
            continue
        a, b = min(was.seconds), min(cost.seconds)
        if a <= 0 or b <= 0:
            continue
        band = NOISE_BANDS * max(_spread(was.seconds), _spread(cost.seconds))
        factor = b / a
        if max(factor, 1 / factor) <= max(1 + band, MIN_FACTOR):
            continue
        slower = factor > 1
        gates = bool(slower and options.slowdown and factor >= options.slowdown)
        memory = ""
        if was.peak_mb is not None and cost.peak_mb is not None:
            memory = f"; peak memory {was.peak_mb:.1f} -> {cost.peak_mb:.1f} MiB"
        yield moved("cost", f"{cost.dtype}, {cost.device}", f"forward and backward {a * 1e6:.0f} -> {b * 1e6:.0f} µs "
                    f"({factor:.2f}x, {'slower' if slower else 'faster'}; noise band ±{band:.0%}){memory}", gates,
                    cost.dtype)


def _spread(samples: tuple[float, ...]) -> float:
    """How far the typical sample lies above the fastest, relatively: (median - fastest) / fastest."""
    return (statistics.median(samples) - min(samples)) / min(samples) if samples and min(samples) > 0 else 0.0


def _compile(cells: dict, options: Options) -> Iterator[Moved]:
    owners = options.owners or {}
    for (entry, dtype, device), (kind, a, b) in cells.items():
        found = []
        if b.get("graph_breaks", 0) > a.get("graph_breaks", 0):
            reason = f": {b['graph_break']}" if b.get("graph_break") else ""
            found.append(f"graph breaks {a.get('graph_breaks', 0)} -> {b['graph_breaks']}{reason}")
        if b.get("recompiles", 0) > a.get("recompiles", 0):
            found.append(f"recompiles {a.get('recompiles', 0)} -> {b['recompiles']}")
        seconds_a, seconds_b = a.get("compile_seconds"), b.get("compile_seconds")
        grew = seconds_a and seconds_b and seconds_b > COMPILE_FACTOR * seconds_a
        if grew and seconds_b - seconds_a > COMPILE_SECONDS:
            found.append(f"compile time {seconds_a:g} -> {seconds_b:g} s ({seconds_b / seconds_a:.1f}x)")
        if found:
            yield Moved("compile", entry, LAYERS.get(kind, "operators"), f"{dtype}, {device}", "; ".join(found),
                        False, "", owners.get(entry, ()))


def _entry_notes(before: EntryRecord, after: EntryRecord) -> list[str]:
    if before.error or after.error:
        side = f"old: {before.error}" if before.error else f"new: {after.error}"
        return [f"not compared: its record has an error ({side})"]
    return [n for n in after.notes if "not recorded" in n or "random" in n][:1]


def _layers(new: Record, compared: dict[str, bool], moved: list[Moved]) -> tuple[Layer, ...]:
    layers = []
    for layer in LAYER_ORDER:
        names = [n for n, r in new.entries.items() if LAYERS.get(r.kind, "operators") == layer and n in compared]
        if not names:
            continue  # no entry of this layer in both records
        counts = {}
        for kind in CLASSES:
            entries = {m.entry for m in moved if m.kind == kind and m.entry in names}
            if entries:
                counts[kind] = len(entries)
        layers.append(Layer(layer, sum(compared[n] for n in names), counts, sum(not compared[n] for n in names)))
    return tuple(layers)

"""What a record holds, as plain data (no torch): each recorded value's description, each cost measurement, and one
entry's record. The tensors themselves live in the entry's file (:mod:`audit.behaviour.store`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

#: The unit roundoff of each dtype a value may be recorded in (complex: that of its parts).
EPS = {"float64": 2.0 ** -52, "float32": 2.0 ** -23, "float16": 2.0 ** -10, "bfloat16": 2.0 ** -7,
       "complex128": 2.0 ** -52, "complex64": 2.0 ** -23}
#: Units of a dtype's precision at a value's largest magnitude that any comparison allows on top of the measured
#: errors: a change of a few roundings is never a change of behaviour.
FLOOR_ULPS = 4

@dataclass(frozen=True)
class Value:
    """One recorded tensor: where it lies in the entry's file (``key``), what it is (``kind``, ``label``: "gradient
    of input 1"), the cell it was computed in, the case it was computed on, and how far its own computation is from
    exact arithmetic here: ``error`` (the largest difference from the same computation in float64, or for a
    float64 value the float32 computation's error scaled by their precisions) and ``scale`` (the largest magnitude
    of the float64 result)."""

    key: str
    kind: str
    label: str
    dtype: str
    device: str
    case: str
    error: float
    scale: float
    exact: bool = False  #: an integer or bool value: compared exactly

    def allowance(self, other: Value) -> float:
        """How far this value and ``other`` (the same computation in another environment) may differ: each lies
        within its own error of exact arithmetic, so their difference lies within the sum, plus
        :data:`FLOOR_ULPS` roundings at their scale."""
        if self.exact or other.exact:
            return 0.0
        return self.error + other.error + FLOOR_ULPS * EPS.get(self.dtype, 0.0) * max(self.scale, other.scale)

    @staticmethod
    def from_json(data: dict[str, Any]) -> Value:
        """The inverse of :func:`dataclasses.asdict`."""
        return Value(**data)


@dataclass(frozen=True)
class Cost:
    """A timed forward and backward on the first fixed case: each sample's seconds per call, and the peak memory
    where it can be measured (``memory`` says what was measured, or why nothing was)."""

    dtype: str
    device: str
    seconds: tuple[float, ...]
    peak_mb: float | None = None
    memory: str = ""

    @staticmethod
    def from_json(data: dict[str, Any]) -> Cost:
        """The inverse of :func:`dataclasses.asdict`."""
        return Cost(**{**data, "seconds": tuple(data["seconds"])})


@dataclass(frozen=True)
class EntryRecord:
    """One entry's record: its values and costs, its module's state-dict keys (name -> shape and dtype), what
    loading the old record's checkpoint here gave ("" loaded, else why not; None: not tried), what was not recorded
    and why (``notes``), or the ``error`` that stopped it."""

    name: str
    kind: str
    digest: str | None = None
    values: tuple[Value, ...] = ()
    cost: tuple[Cost, ...] = ()
    state: dict[str, str] = field(default_factory=dict)
    load: str | None = None
    notes: tuple[str, ...] = ()
    error: str = ""
    #: The simple module constants its code reads (``module.NAME`` -> value): one computed at import from the
    #: environment moves with it while the code's digest stays.
    constants: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Plain data for the manifest."""
        return {"name": self.name, "kind": self.kind, "digest": self.digest,
                "values": [asdict(v) for v in self.values], "cost": [asdict(c) for c in self.cost],
                "state": dict(self.state), "load": self.load, "notes": list(self.notes), "error": self.error,
                "constants": dict(self.constants)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> EntryRecord:
        """The inverse of :meth:`to_json`."""
        return EntryRecord(name=data["name"], kind=data["kind"], digest=data.get("digest"),
                           values=tuple(Value.from_json(v) for v in data["values"]),
                           cost=tuple(Cost.from_json(c) for c in data["cost"]), state=dict(data["state"]),
                           load=data.get("load"), notes=tuple(data["notes"]), error=data.get("error", ""),
                           constants=dict(data.get("constants", {})))


#: How entry kinds group into the layers of an upgrade's acceptance, bottom first.
LAYERS = {"function": "operators", "op": "operators", "callable": "operators", "module": "modules",
          "model": "models"}
LAYER_ORDER = ("operators", "modules", "models")

"""Validated registry data to frozen :mod:`audit.registry.model` objects."""

from __future__ import annotations

import functools
from typing import Any

from audit.registry.model import (DEFAULT_DENSITY, DEFAULT_DOMAIN, DEFAULT_KIND, Entry, EntryKind, Expectation,
                                  Supports, TensorSpec, ToleranceOverride, Training, ValueSpec)


def build_entry(data: dict[str, Any], line: int) -> Entry:
    """One merged, validated entry as an :class:`Entry`."""
    owner = data["owner"]
    return Entry(
        name=data["name"],
        owners=tuple(owner) if isinstance(owner, list) else (owner,),
        kind=EntryKind(data.get("kind", DEFAULT_KIND)),
        target=data["target"],
        inputs=tuple(_input(spec) for spec in data.get("inputs", ())),
        line=line,
        load=tuple(data.get("load", ())),
        reference=data.get("reference"),
        proxy=data.get("proxy"),
        proxy_modes=tuple(data.get("proxy_modes", ("train", "eval"))),
        vjp=data.get("vjp"),
        backward_only=bool(data.get("backward_only", False)),
        triton=data.get("triton", ""),
        dims=tuple((name, r[0], r[1]) for name, r in data.get("dims", {}).items()),
        batch=data.get("batch"),
        mutates=tuple(data.get("mutates", ())),
        views=tuple(data.get("views", ())),
        supports=_supports(data.get("supports", {})),
        tolerance=tuple((dt, ToleranceOverride(**tol)) for dt, tol in sorted(data.get("tolerance", {}).items())),
        expect=tuple(Expectation(**w) for w in data.get("expect", ())),
        checks=tuple(data.get("checks", ())),
        training=Training(**data["training"]) if "training" in data else _DEFAULT_TRAINING,
    )


def _input(spec: dict[str, Any]) -> TensorSpec | ValueSpec:
    if "value" in spec:
        return ValueSpec(spec["value"])
    low, high = spec.get("domain", DEFAULT_DOMAIN)
    constant = spec.get("constant")
    return TensorSpec(shape=tuple(spec["shape"]), domain=(float(low), float(high)),
                      kinks=tuple(float(k) for k in spec.get("kinks", ())),
                      requires_grad=spec.get("requires_grad", constant is None), dtype=spec.get("dtype"),
                      sparse_layout=spec.get("layout"), density=float(spec.get("density", DEFAULT_DENSITY)),
                      constant=tuple(constant) if isinstance(constant, list) else constant)


def _supports(data: dict[str, Any]) -> Supports:
    return _claims(tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in data.items()))


@functools.lru_cache(maxsize=256)
def _claims(values: tuple[tuple[str, Any], ...]) -> Supports:
    """One :class:`Supports` per distinct set of claims (most entries share their defaults'). Validated claims
    are booleans and strings: no two values that differ compare equal (as 1 and True would)."""
    return Supports(**dict(values))


#: The training settings of every entry that gives none (all but kind model).
_DEFAULT_TRAINING = Training()

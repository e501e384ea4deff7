"""What a scan finds: a custom Function or operator, how it was called, and from where."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Call:
    """One call's arguments: per argument, ``("tensor", shape, dtype, strides, device, requires_grad, lo, hi)``
    or ``("value", repr)``."""

    args: tuple


@dataclass
class Finding:
    """A custom Function (``kind`` function, ``target`` ``module:Qualname``) or operator (``kind`` op,
    ``target`` ``namespace::name``), with every call seen and every place it was called from."""

    kind: str
    target: str
    source: str = ""
    calls: list = field(default_factory=list)
    sites: list = field(default_factory=list)
    grad: bool = False
    #: The first call's arguments themselves (tensors detached and copied), for the probes of stub notes.
    sample: tuple = field(default=(), repr=False, compare=False)

    def to_json(self) -> dict:
        """For ``--format json``."""
        return {"kind": self.kind, "target": self.target, "source": self.source, "sites": self.sites,
                "calls": len(self.calls), "under_grad": self.grad,
                "signatures": sorted({_signature(c) for c in self.calls})}


def merged(findings) -> list[Finding]:
    """One finding per (kind, target), in first-seen order, every site and call kept."""
    found: dict[tuple, Finding] = {}
    for finding in findings:
        key = (finding.kind, finding.target)
        if key not in found:
            found[key] = finding
            continue
        kept = found[key]
        kept.sites += [s for s in finding.sites if s not in kept.sites]
        kept.calls += finding.calls
        kept.grad = kept.grad or finding.grad
        kept.sample = kept.sample or finding.sample
    return list(found.values())


def _signature(call: Call) -> str:
    parts = []
    for arg in call.args:
        if arg[0] == "tensor":
            _, shape, dtype, strides, device, grad, _, _ = arg
            parts.append(f"{dtype}{list(shape)} strides {list(strides)} {device}{' grad' if grad else ''}")
        else:
            parts.append(arg[1])
    return "(" + ", ".join(parts) + ")"

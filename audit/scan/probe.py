"""What one call of a recorded Function says about the claims its stub should make: a backward that is not the
forward's derivative (a step, a rounding, a sign: the gradient looks intended, and wants a ``proxy``), and a forward
that returns another dtype than its input's. Read from the first call's own arguments, once per Function."""

from __future__ import annotations

import torch

from audit.kit.autograd import vjp
from audit.scan.findings import Finding

#: Random directions the forward is differenced along: a step crossed by one of them still leaves the others flat.
DIRECTIONS = 3
#: A directional derivative this small beside the backward's (relative) counts as zero: the forward is flat there.
FLAT = 1e-2

INTENDED = ("the backward looks intended: on the inputs seen the forward's derivative is {numeric:.3g} along a random "
            "direction where the backward gives {analytic:.3g} (a step, a rounding or a sign with a surrogate or "
            "straight-through gradient?); gradcheck fails such a backward by design: declare `proxy:` with a function "
            "whose autograd gradient is the intended one, and `kinks:` where the forward jumps (see Intended "
            "gradients in the registry docs)")
OTHER_DTYPE = ("the forward returned {got} for {given} inputs: the dtype check will fail it unless it computes in its "
               "input's dtype (or the claim is narrowed to the dtypes it keeps)")


def notes(finding: Finding, fn) -> list[str]:
    """The comments a stub for ``finding`` (whose Function's ``apply`` is ``fn``) should carry; [] when the call
    cannot be repeated (a target that raises here is the audit's to judge, not the scan's)."""
    args = list(finding.sample)
    floating = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.is_floating_point()]
    if not floating:
        return []
    try:
        return _dtype_note(fn, args, floating) + _intended_note(fn, args, floating)
    except Exception:
        return []


def _dtype_note(fn, args, floating) -> list[str]:
    """A note where the forward, given the inputs seen (and the same values in float64, which a stub claims), returns
    a floating output of another dtype."""
    seen = args[floating[0]].dtype
    for given in dict.fromkeys((seen, torch.float64)):
        moved = [a.to(given) if i in floating else a for i, a in enumerate(args)]
        with torch.no_grad():
            outputs = _tensors(fn(*moved))
        other = next((o.dtype for o in outputs if o.is_floating_point() and o.dtype != given), None)
        if other is not None:
            return [OTHER_DTYPE.format(got=_name(other), given=_name(given))]
    return []


def _intended_note(fn, args, floating) -> list[str]:
    generator = torch.Generator().manual_seed(0)
    leaves = list(args)
    for i in floating:
        leaves[i] = args[i].detach().clone().requires_grad_()
    outputs = [o for o in _tensors(fn(*leaves)) if o.requires_grad]
    if not outputs:
        return []
    wrt = [leaves[i] for i in floating]
    cotangents = [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(o) for o in outputs]
    grads = vjp(outputs, wrt, cotangents, fill=False)
    for _ in range(DIRECTIONS):
        directions = [torch.randn(x.shape, generator=generator, dtype=torch.float64).to(x) for x in wrt]
        analytic = sum(float((g.double() * u.double()).sum()) for g, u in zip(grads, directions) if g is not None)
        numeric = _directional(fn, args, floating, directions, cotangents)
        if abs(analytic) > 1e-6 and abs(numeric) <= FLAT * abs(analytic):
            return [INTENDED.format(numeric=numeric, analytic=analytic)]
    return []


def _directional(fn, args, floating, directions, cotangents) -> float:
    """<cotangents, the forward's central difference along ``directions``>, with a step of 1e-3 of the inputs'
    scale (float32's precision: a surrogate's slope is order one)."""
    scale = max(float(args[i].detach().abs().max()) for i in floating) or 1.0
    step = 1e-3 * scale

    def at(sign: float):
        moved = list(args)
        for i, u in zip(floating, directions):
            moved[i] = args[i].detach() + sign * step * u
        with torch.no_grad():
            return [o for o in _tensors(fn(*moved)) if o.is_floating_point()]

    plus, minus = at(1.0), at(-1.0)
    return sum(float((c.double() * (p.double() - m.double())).sum()) for c, p, m in zip(cotangents, plus, minus)) / (
        2 * step)


def _tensors(result) -> list[torch.Tensor]:
    items = result if isinstance(result, (tuple, list)) else (result,)
    return [t for t in items if isinstance(t, torch.Tensor)]


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")

"""Is a failing point one where the function has no derivative? Finite differences decide.

A gradient check that fails where the function is not differentiable (a kink, a tie, a repeated
eigenvalue: the points shrinking likes best) has found no wrong gradient: there is none to be right.
Along one input coordinate, a smooth function's one-sided differences converge to the central one as
the step shrinks, and central differences at two steps agree. Where they do not, the point is a kink
(one-sided slopes differ however small the step) or a jump (the central estimate grows as the step
shrinks). A wrong gradient at a smooth point, even a special one such as 0, is still a wrong gradient.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from audit.core.contract import real_counterpart
from audit.kit.explain import _analytic, _numeric, _unravel
from audit.kit.jacobians import realified
from audit.toolkit.jacobian import _EPS, gradcheck_tolerance

#: At most this many mismatching Jacobian columns are probed; past it the failure stands.
MAX_PROBES = 64
#: Steps are ``eps`` and ``eps / SHRINK``: a smooth function's one-sided gap shrinks by this factor.
SHRINK = 10.0


@dataclass(frozen=True)
class Kink:
    """Where finite differences along one input coordinate disagree with each other."""

    input: int
    index: tuple
    left: float
    right: float
    central: float
    kind: str = "kink"  # kink (slopes differ), jump (values leap: no continuity), edge (undefined beside)
    direction: bool = False  # found along a random direction in input ``input``, not along one element

    def describe(self) -> str:
        """One line: where, what, and the disagreeing slopes."""
        what = {"kink": "a kink", "jump": "a jump (the value itself is not continuous: not unique there)",
                "edge": "an edge of the domain"}[self.kind]
        where = "a random direction" if self.direction else f"index {list(self.index)}"
        return (f"{what} along input {self.input} at {where}: one-sided slopes {self.left:.6g} "
                f"(left) and {self.right:.6g} (right), central {self.central:.6g}")


def probe_jacobian(fn, inputs, eps: float, atol: float, rtol: float) -> Kink | None:
    """Locate where ``fn``'s analytic and numeric Jacobians disagree, worst first, and return the first place
    that is a singular point (or None: every disagreement is at a smooth point)."""
    analytic, numeric = _analytic(fn, inputs), _numeric(fn, inputs, eps)
    columns: dict[tuple[int, int], float] = {}
    for (_, i), a in analytic.items():
        n = numeric[(_, i)]
        if not a.numel():
            continue
        excess = ((a - n).detach().abs() - (atol + rtol * n.detach().abs())).nan_to_num(nan=float("inf")).amax(dim=0)
        for col in torch.nonzero(excess > 0).reshape(-1).tolist():
            columns[(i, col)] = max(columns.get((i, col), float("-inf")), float(excess[col]))
    return probe_columns(fn, inputs, sorted(columns, key=lambda column: columns[column], reverse=True), eps, atol, rtol)


def probe_columns(fn, inputs, columns, eps: float, atol: float, rtol: float) -> Kink | None:
    """The first of the ``(input, flat index)`` coordinates (at most MAX_PROBES) along which ``fn`` is
    singular at ``inputs``: differentiability is a property of the point, so one is enough."""
    for i, col in columns[:MAX_PROBES]:
        kink = kink_at(fn, inputs, i, col, eps, atol, rtol)
        if kink is not None:
            return kink
    return None


def kink_at(fn, inputs, i: int, flat, eps: float, atol: float, rtol: float) -> Kink | None:
    """A :class:`Kink` when ``fn`` has no derivative at ``inputs`` along element ``flat`` of input ``i`` (or,
    given a tensor of the input's shape, along that direction)."""
    base = [x.detach().clone(memory_format=torch.contiguous_format) for x in inputs]
    steps = (-eps, -eps / SHRINK, -eps / SHRINK / 3, 0.0, eps / SHRINK / 3, eps / SHRINK, eps)
    at = {h: _values(fn, base, i, flat, h) for h in steps}
    f0 = at[0.0]
    slopes = {}
    for h in (eps, eps / SHRINK):
        slopes[h] = ((at[h] - f0) / h, (f0 - at[-h]) / h, (at[h] - at[-h]) / (2 * h))
    (right, left, central), (right2, left2, central2) = slopes[eps], slopes[eps / SHRINK]
    allowed = atol + rtol * central.abs()
    gap, gap2 = (right - left).abs(), (right2 - left2).abs()
    kink = (gap > allowed) & (gap2 > gap / 2)  # one-sided slopes differ and do not converge
    jump = (central - central2).abs() > allowed  # central estimates move with the step
    undefined = torch.isfinite(f0) & ~torch.isfinite(right + left + right2 + left2)  # a domain edge
    leap = _leap(at, eps)
    noise = _rounding(at, eps) if _resolvable(base[i], flat, eps) else torch.zeros_like(leap)
    bad = (((kink | jump) & (leap | ~noise)) | undefined).nonzero().reshape(-1)
    if not len(bad):
        return None
    k = int(bad[0])
    kind = "edge" if undefined[k] else "jump" if leap[k] else "kink"
    index = _unravel(flat, inputs[i].shape) if isinstance(flat, int) else ()
    return Kink(i, index, float(left[k]), float(right[k]), float(central[k]), kind,
                direction=not isinstance(flat, int))


def _resolvable(x: torch.Tensor, flat, eps: float) -> bool:
    """Whether float64 itself resolves the probe's smallest step at this coordinate: a float64 (or complex128)
    input whose value is small enough that the step is far above its rounding. Then noise in the values is the
    target's (a forward less precise than its dtype); at 1e9, or in float32, it is the dtype's own, and the probe
    judges as it always did."""
    if x.dtype not in (torch.float64, torch.complex128):
        return False
    value = float(x.reshape(-1)[flat].abs()) if isinstance(flat, int) else float(x.abs().max()) if x.numel() else 0.0
    return value * torch.finfo(torch.float64).eps * 1e4 < eps / SHRINK / 3


def _rounding(at: dict, eps: float) -> torch.Tensor:
    """Where the values' second difference does not shrink with the step (a smooth function's shrinks by
    ``SHRINK**2``, a kink's by ``SHRINK``, but rounding noise stays as large), or where the values do not change at
    all on either side of a small step although their slope says float64 would show it: a staircase (a float64
    cell whose forward rounds through float32). There disagreeing slopes say nothing of a derivative, and a
    failure is not excused as a kink: finite differences cannot judge it, and the target's forward is less
    precise than its dtype."""
    f0, near = at[0.0], eps / SHRINK
    wide = (at[eps] - 2 * f0 + at[-eps]).abs()
    narrow = (at[near] - 2 * f0 + at[-near]).abs()
    nearer = (at[near / 3] - 2 * f0 + at[-near / 3]).abs()  # noise is as likely small at one step: two steps
    slope = ((at[eps] - at[-eps]) / (2 * eps)).abs()
    flat = torch.zeros_like(f0, dtype=torch.bool)
    for h in (near, near / 3):  # no change at all on both sides where the slope predicts one float64 must show
        flat |= (at[h] == f0) & (at[-h] == f0) & (slope * h > 1e-13 * (1 + f0.abs()))
    return (torch.maximum(narrow, 3 * nearer) > wide / 3) | flat


def _leap(at: dict, eps: float) -> torch.Tensor:
    """Where the value does not approach f(x) as the step shrinks (on either side): a discontinuity."""
    f0, leaps = at[0.0], []
    for side in (1, -1):
        far, near = (at[side * eps] - f0).abs(), (at[side * eps / SHRINK] - f0).abs()
        leaps.append((near > far / 2) & (near > 1e-6 * (1 + f0.abs())))
    return leaps[0] | leaps[1]


def singular_point(fn, inputs, eps: float, atol: float, rtol: float, kinds=("kink", "jump", "edge")) -> Kink | None:
    """The first input coordinate (of at most MAX_PROBES) along which ``fn`` has a singularity of one of
    ``kinds`` at ``inputs``, or None: for comparisons that cannot say which coordinate failed."""
    for i, x in enumerate(inputs):
        for flat in range(min(x.numel(), MAX_PROBES)):
            kink = kink_at(fn, inputs, i, flat, eps, atol, rtol)
            if kink is not None and kink.kind in kinds:
                return kink
    return None


#: Random directions probed per input, beside its coordinates, before a disagreement counts as a failure.
DIRECTIONS = 4


def any_direction(fn, inputs, eps: float, atol: float, rtol: float) -> Kink | None:
    """A singular point of ``fn`` at ``inputs`` along any coordinate of any input (at most MAX_PROBES each) or
    along a few random unit directions per input (seeded: the same every time): differentiability is a
    property of the point. A matrix function at a rank-deficient input can be smooth along the coordinate
    where analytic and numeric disagree and kinked along another; x·y/|(x, y)| at 0 is smooth along both
    axes and kinked along the diagonal."""
    found = singular_point(fn, inputs, eps, atol, rtol)
    if found is not None:
        return found
    generator = torch.Generator().manual_seed(0)
    for i, x in enumerate(inputs):
        for _ in range(DIRECTIONS if x.numel() > 1 else 0):
            direction = torch.randn(x.shape, generator=generator, dtype=torch.float64)
            direction = (direction / direction.norm()).to(x.dtype).to(x.device)
            found = kink_at(fn, inputs, i, direction, eps, atol, rtol)
            if found is not None:
                return found
    return None


def _values(fn, base, i: int, flat: int, h: float) -> torch.Tensor:
    xs = [x.clone() for x in base]
    if h and isinstance(flat, int):
        xs[i].view(-1)[flat] += h
    elif h:
        xs[i] += h * flat
    with torch.no_grad():
        out = fn(*xs)
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    flat_values = [o.detach().double().reshape(-1).cpu() for o in outputs if isinstance(o, torch.Tensor)]
    return torch.cat(flat_values) if flat_values else torch.zeros(0, dtype=torch.float64)


#: Seconds a cell may spend probing failures for singular points (each probe evaluates the target a few
#: times per coordinate, on every failing example the shrink tries): past it a failure stands as it is,
#: so a slow target's real failure is reported, not turned into a timeout.
PROBE_BUDGET = 60.0


def _budget_left(subject) -> bool:
    if subject.state.get("probe_seconds", 0.0) < PROBE_BUDGET:
        return True
    subject.metrics["non_smooth_unprobed"] = subject.metrics.get("non_smooth_unprobed", 0) + 1
    return False


def _timed(subject, probe):
    start = time.perf_counter()
    try:
        return probe()
    finally:
        subject.state["probe_seconds"] = subject.state.get("probe_seconds", 0.0) + time.perf_counter() - start


def excused(subject, check: str, case, fn, inputs, eps: float, columns=None) -> bool:
    """True when ``fn`` has no derivative at ``case`` along a coordinate where its gradient failed (then
    noted in the cell's metrics); False when every failing coordinate is smooth: a wrong gradient.
    ``columns`` names the failing ``(input, flat index)`` places; by default they are located by
    comparing the analytic and numeric Jacobians."""
    if not _budget_left(subject) or _sparse(inputs):
        return False
    atol, rtol = gradcheck_tolerance(subject)
    fn, inputs, columns = _real_view(fn, inputs, columns)
    if columns is None:
        kink = _timed(subject, lambda: probe_jacobian(fn, inputs, eps, atol, rtol))
    else:
        kink = _timed(subject, lambda: probe_columns(fn, inputs, columns, eps, atol, rtol))
    if kink is None:  # smooth along every failing coordinate: the point may still lack a derivative elsewhere
        kink = _timed(subject, lambda: any_direction(fn, inputs, eps, atol, rtol))
    if kink is not None:
        note(subject, check, case, kink)
    return kink is not None


def excused_anywhere(subject, check: str, case, fn, inputs, *, values: bool = False) -> bool:
    """True (and noted) when ``fn`` is singular at ``case`` along some input coordinate: any singularity
    for a gradient comparison, a jump (a value that is not unique there) for a value comparison."""
    if not _budget_left(subject) or _sparse(inputs):
        return False
    kinds = ("jump",) if values else ("kink", "jump", "edge")
    fn, leaves, _ = _real_view(fn, [x.detach() for x in inputs], None)
    eps = _EPS[real_counterpart(subject.dtype)]
    kink = _timed(subject, lambda: singular_point(fn, leaves, eps, *gradcheck_tolerance(subject), kinds=kinds))
    if kink is not None:
        note(subject, check, case, kink)
    return kink is not None


def _real_view(fn, inputs, columns):
    """``fn`` and ``inputs`` as real ones (:func:`~audit.toolkit.jacobian.realified`: a complex element is probed
    along its real and its imaginary part), and the failing ``columns`` renumbered to match."""
    real_fn, real_inputs = realified(fn, inputs)
    if columns is not None:
        columns = [(i, 2 * c + part) if inputs[i].is_complex() else (i, c)
                   for i, c in columns for part in ((0, 1) if inputs[i].is_complex() else (0,))]
        columns = list(dict.fromkeys(columns))
    return real_fn, real_inputs, columns


def _sparse(inputs) -> bool:
    """Whether a sparse input is among ``inputs``: its probes step dense coordinates, which it has not; a sparse
    entry's failures are never excused as kinks."""
    return any(x.layout != torch.strided for x in inputs)


def note(subject, check: str, case, kink: Kink) -> None:
    """Record in the cell's metrics that a failure at a singular point was not counted."""
    seen = subject.metrics.setdefault("non_smooth", {"examples": 0})
    seen["examples"] += 1
    seen.setdefault("first", f"{check} disagreed on {case.describe()}, where the function has no derivative: "
                             f"{kink.describe()}; not counted as a failure (declare kinks or narrow "
                             "domain to keep draws away from such points)")


def backward_of(fn, cotangent_seed: int):
    """The gradients of <fn(xs), fixed random cotangents> as a differentiable function of ``xs``: where
    it has no derivative, neither has ``fn`` a second one."""
    from audit.kit.autograd import filled, vjp

    def grads(*xs):
        with torch.enable_grad():
            leaves = [x if x.requires_grad else x.detach().requires_grad_() for x in xs]
            out = fn(*leaves)
            outputs = [o for o in (out if isinstance(out, tuple) else (out,)) if o.requires_grad]
            if not outputs:
                return tuple(torch.zeros_like(x) for x in xs)
            found = vjp(outputs, leaves, cotangent_seed, create_graph=True, fill=False)
        return tuple(filled(found, xs))

    return grads

"""Low precision: the largest value a computation passes through, and judging by the error the same
computation makes in that precision."""

from __future__ import annotations

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from audit.kit.autograd import differentiable, grad_inputs, vjp
from audit.kit.compare import Finding, _index, mismatches, number
from audit.kit.tensors import dense, floating, fresh, outputs_of


class Largest(TorchDispatchMode):
    """Records the largest finite |value| among the floating tensors every operation takes and returns."""

    def __init__(self):
        super().__init__()
        self.largest = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for value in (*args, *(kwargs or {}).values(), *(out if isinstance(out, (tuple, list)) else (out,))):
            if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
                finite = value.detach().abs().nan_to_num(nan=0.0, posinf=0.0)
                self.largest = max(self.largest, float(finite.max()))
        return out


def largest_value(run) -> float:
    """The largest finite |value| any operation took or produced while ``run()`` ran (forward and backward)."""
    with Largest() as mode:
        run()
    return mode.largest


def rounded_mismatches(label: str, got, expected, tol, run) -> list:
    """:func:`mismatches`; when some fail under a ``scale`` term (float16, bfloat16), again with that term applied
    to ``run()``, the largest value the float64 computation passes through: a result that cancels to near zero
    carries the rounding error of its operands, not its own."""
    found = mismatches(label, got, expected, tol)
    if found and tol.scale:
        found = mismatches(label, got, expected, tol, magnitude=run())
    return found


#: A result in a low precision is judged against the truth (the reference in float64 on the same rounded inputs) by
#: how far the reference itself, run in that precision, is from it: the target may be off by this many times the
#: reference's own error. Half precision: 2, FlashAttention's rule (its kernels, like most, compute in float32
#: inside and round once: measured at 1x or less). float32: 10, flex attention's factor for float32, where a kernel
#: has no wider precision inside and chains roundings a fused torch kernel avoids (correct ones measured up to 7x).
OWN_ERROR_RATIO = {torch.float16: 2.0, torch.bfloat16: 2.0, torch.float32: 10.0}


#: ... plus this many roundings of the tensor's largest true value (eps of the dtype times max|truth|: FA3's atol
#: term), so that a kernel which rounds once is never held to a reference that happened to round exactly; and as
#: many float32 roundings of the inputs' largest value (the precision kernels compute in: what a cancellation keeps).
OWN_ERROR_FLOOR = 2.0


def cotangents_in(outputs, seed: int, dtype) -> list:
    """:func:`grad_outputs` rounded through ``dtype`` first: the same values in every run of a three-way
    comparison (the target's, the reference's in ``dtype`` and the float64 truth)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=torch.float64).to(dtype).to(o.dtype).to(o.device)
            for o in outputs]


def rounded_vjps(f, args, seed: int, dtype):
    """The floating outputs of ``f(*args)`` (detached) and the gradients of <differentiable outputs,
    :func:`cotangents_in` ``dtype``> for the arguments that require grad (zeros where unused)."""
    outs = [o for o in outputs_of(f(*args)) if floating(o)]
    live, inputs = differentiable(outs), grad_inputs(args)
    return [o.detach() for o in outs], vjp(live, inputs, cotangents_in(live, seed, dtype)) if live and inputs else []


def leaves_in(args, dtype) -> list:
    """``args`` with each floating tensor a new leaf at ``dtype``'s precision (a complex tensor in its complex
    counterpart, a real one in its real one), requiring grad as it did; the rest as it is."""
    def moved(a):
        kind = dtype.to_complex() if a.is_complex() else dtype.to_real()
        return a.detach().to(kind).requires_grad_(a.requires_grad)

    return [moved(a) if isinstance(a, torch.Tensor) and floating(a) else a for a in args]


def three_runs(fn, ref, args, seed: int, dtype, *, gradients: bool = True):
    """(the target's, the truth's, the reference's in ``dtype``) results on the same values: each (outputs,
    gradients), gradients with the same rounded cotangents (empty lists with ``gradients`` False). The truth is
    the reference on ``args`` widened to float64; where the reference cannot run in ``dtype`` (it raises), its
    own error is taken as the truth's rounding to ``dtype`` (the third is then None)."""
    def run(f, xs):
        if gradients:
            return rounded_vjps(f, xs, seed, dtype)
        with torch.no_grad():
            return [o.detach() for o in outputs_of(f(*xs)) if floating(o)], []

    got, truth = run(fn, fresh(args)), run(ref, leaves_in(args, torch.float64))
    try:
        own = run(ref, fresh(args))
    except Exception:  # the reference has no kernel in this dtype: the best a rounding result can do stands in
        own = None
    return got, truth, own


def own_error_mismatches(label: str, got, truth, own, dtype, ratios=None, inputs: str = "",
                         magnitude: float = 0.0, against: str = "the reference") -> list:
    """One line per tensor of ``got`` (labelled "<label> <i>") whose error from ``truth`` exceeds
    OWN_ERROR_RATIO times ``own``'s (the reference in ``dtype``; None: the truth rounded to ``dtype``) plus
    OWN_ERROR_FLOOR roundings of its largest true value; or that is inf or NaN where the truth, rounded to
    ``dtype``, is finite (``inputs`` says what produced it: :func:`value_range`). ``ratios``, if given, receives
    "<label> <i>" -> the target's error over the reference's (over the floor where the reference's is smaller).
    The floor also holds two float32 roundings of ``magnitude`` (the inputs' largest value): kernels compute in
    float32, and a result that cancels (to zero, or below its operands) carries their rounding, not its own.
    Elements where the reference in ``dtype`` is not finite are not compared (it says nothing there). ``against``
    names what the truth was computed with (the reference, or a declared proxy)."""
    if len(got) != len(truth):
        return [f"{label}: {len(got)} tensors, expected {len(truth)}"]
    own = own if own is not None and len(own) == len(truth) else [t.to(dtype) for t in truth]
    found = []
    for i, (g, t, o) in enumerate(zip(got, truth, own)):
        problem = own_error_mismatch(g, t, o, dtype, ratios, f"{label} {i}", inputs, magnitude, against)
        if problem:
            found.append(Finding(f"{label} {i}: {problem}", f"{label} {i}", label))
    return found


def own_error_mismatch(got, truth, own, dtype, ratios=None, name: str = "", inputs: str = "",
                       magnitude: float = 0.0, against: str = "the reference") -> str | None:
    """Why ``got`` is further from ``truth`` than the precision allows (:func:`own_error_mismatches`), or None."""
    got, truth, own = (dense(t).detach().cpu().to(torch.float64) for t in (got, truth, own))
    if got.shape != truth.shape:
        return f"shape {list(got.shape)} != expected {list(truth.shape)}"
    representable = torch.isfinite(truth.to(dtype).to(torch.float64))
    overflow = representable & ~torch.isfinite(got)
    if overflow.any():
        return _overflow(got, truth, overflow, inputs)
    if not got.numel():
        return None
    judged = representable & torch.isfinite(own)
    error = (got - truth).abs().masked_fill(~judged, 0.0)
    theirs = (own - truth).abs().masked_fill(~judged, 0.0)
    largest = float(truth.abs().masked_fill(~representable, 0.0).max())
    floor = OWN_ERROR_FLOOR * (torch.finfo(dtype).eps * largest + torch.finfo(torch.float32).eps * magnitude)
    mine, reference = float(error.max()), float(theirs.max())
    if ratios is not None:  # the error over the reference's, or over one rounding where the reference's is smaller
        ratios[name] = round(mine / max(reference, floor), 3) if max(reference, floor) else 0.0
    ratio = OWN_ERROR_RATIO.get(dtype, 2.0)
    allowed = ratio * reference + floor
    if mine <= allowed:
        return None
    flat = int(error.reshape(-1).argmax())
    name, yardstick = str(dtype).replace("torch.", ""), max(reference, floor)
    measure = (f"{against}'s error in {name}" if reference >= floor else
               f"two roundings of max|true| {largest:.3g} and of the inputs' {magnitude:.3g} in float32: "
               f"{against}'s error in {name} is {reference:.3g}")
    times = f"{mine / yardstick:.3g}x" if yardstick else "more than"
    return (f"error {mine:.3g} = {times} {name}'s own {yardstick:.3g} for this computation ({measure};"
            f" allowed {ratio:g}x {against}'s + those roundings = {allowed:.3g}) at index "
            f"{_index(error, got.shape)} (got {got.reshape(-1)[flat].item():.6g}, "
            f"true {truth.reshape(-1)[flat].item():.6g})")


def _overflow(got, truth, where, inputs: str = "") -> str:
    """The first element that is inf or NaN where the truth is finite in the dtype, and how many there are."""
    flat = int(where.reshape(-1).int().argmax())
    at = _index(where.int(), got.shape)
    return (f"got {number(got.reshape(-1)[flat].item())} at index {at} where the true value "
            f"{truth.reshape(-1)[flat].item():.6g} is finite ({int(where.sum())} of {where.numel()} elements): "
            "an overflow or a division by zero inside the computation" + (f" ({inputs})" if inputs else ""))


def largest_input(args) -> float:
    """The largest finite |value| of any floating tensor argument (0 without one)."""
    values = [float(a.detach().abs().double().nan_to_num(nan=0.0, posinf=0.0).max()) for a in args
              if isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel()]
    return max(values, default=0.0)


def value_range(args) -> str:
    """The range of every floating tensor argument's values, as a message names it ("[-11.9, 11.7]")."""
    values = [a.detach().reshape(-1).double() for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()
              and a.numel()]
    if not values:
        return "no floating input"
    flat = torch.cat([v.cpu() for v in values])
    low, high = flat.min().item(), flat.max().item()
    return f"inputs in [{low:.3g}, {high:.3g}]" if f"{low:.3g}" != f"{high:.3g}" else f"every input {low:.3g}"

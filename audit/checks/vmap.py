"""``vmap``: torch.func.vmap over a batch equals the per-sample loop, for outputs and for vjps; jacrev
(and jacfwd when forward-mode AD is claimed) equal finite differences."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.checking.judgement import Kink, KnownBug, Stage, an_op
from audit.kit.autograd import grad_outputs, vjp
from audit.kit.compare import (JACFWD_ALL_ZERO, JACFWD_VS_DIFFERENCES, JACREV_VS_DIFFERENCES, REFUSED_INSIDE, Finding,
                               mismatch)
from audit.kit.jacobians import (DIFFERENCE_STEPS, central_jacobian, eager_jacobian, is_setup_context_refusal,
                                 jacobian_column, realified)
from audit.kit.noise import NOISE_FACTOR, measured_noise, noisy_mismatches
from audit.kit.proxy import bypass_hint, intended_by
from audit.kit.tensors import detached, floating, outputs_of
from audit.kit.tolerance import Tolerance
from audit.toolkit.torch_bugs import CUSTOM_OP_FUNCTORCH, CUSTOM_OP_ZERO_JVP

#: Samples in the batch; each is the drawn case with its batched tensors' values reordered.
BATCH = 3


def vmap(fn, ref, args, *, target, kind, tol, seed, in_dims, forward_ad, batch, proxy_name="", vjp_name="") -> list:
    """On ``batch`` samples of ``args`` (:func:`sample_of`) stacked at ``in_dims``: the outputs and the vjps of the
    target under torch.func.vmap against the per-sample loop, within ``tol`` plus the loop's own rounding noise;
    then jacrev (and jacfwd with ``forward_ad``) on sample 0 against central differences, or, for an entry whose
    backward is intended (``proxy_name``, ``vjp_name``), against the eager Jacobian. ``kind`` says what torch.func's
    refusals mean for the entry."""
    samples = [sample_of(args, k, in_dims) for k in range(batch)]
    stacked = stacked_samples(samples, in_dims)
    dims = tuple(in_dims)
    return (vmap_outputs(target, kind, samples, stacked, dims, tol)
            or vmap_vjps(target, kind, samples, stacked, dims, tol, seed)
            or jacobians(target, kind, samples[0], forward_ad, proxy_name, vjp_name))


def sample_of(args, k: int, in_dims) -> list:
    """Sample ``k`` of a batch, fresh leaves: each tensor at a batched position (``in_dims`` not None) with its
    values reordered (0: as drawn, odd: reversed, then rolled by ``k // 2``), every other argument as it is."""
    found = []
    for a, d in zip(args, in_dims):
        if isinstance(a, torch.Tensor):
            flat = a.detach().reshape(-1)
            if d is not None:
                flat = torch.roll(flat.flip(0) if k % 2 else flat, k // 2)
            a = flat.reshape(a.shape).clone().requires_grad_(a.requires_grad)
        found.append(a)
    return found


def stacked_samples(samples, in_dims) -> list:
    """The samples' tensors stacked along their ``in_dims`` (an unbatched argument: sample 0's, detached)."""
    first = detached(samples[0])
    return [torch.stack([s[i].detach() for s in samples], dim=d) if d is not None else first[i]
            for i, d in enumerate(in_dims)]


def vmap_outputs(target, kind, samples, stacked, in_dims, tol) -> list:
    """The outputs under torch.func.vmap against each sample's own, within the loop's rounding noise."""
    with torch.no_grad():
        expected = [outputs_of(target(*detached(s))) for s in samples]
    got, said = transformed("vmap", kind, lambda: torch.func.vmap(lambda *xs: tuple(outputs_of(target(*xs))),
                                                                   in_dims=in_dims)(*stacked))
    if said:
        return [said]
    for k, sample in enumerate(samples):
        measured = measured_noise(lambda xs: [no_grad_outputs(target, xs)], detached(sample))
        found = noisy_mismatches(f"vmap output (sample {k} of {len(samples)}, in_dims {in_dims})",
                                 [g.select(0, k) for g in got], expected[k], tol, lambda m=measured: m()[0])
        if found:
            return found
    return []


def no_grad_outputs(target, args) -> list:
    """The target's outputs on ``args``, without a graph."""
    with torch.no_grad():
        return outputs_of(target(*args))


def vmap_vjps(target, kind, samples, stacked, in_dims, tol, seed: int) -> list:
    """Per-sample vjps under vmap (torch.func.vjp inside torch.func.vmap) against autograd, sample by sample,
    sample k's cotangents drawn from ``seed + k``."""
    wrt = [i for i, a in enumerate(samples[0]) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not wrt:
        return []
    picked: list[int] = []
    expected: list = []
    cotangents: list = []
    loops: list = []
    for k, sample in enumerate(samples):
        outputs = outputs_of(target(*sample))
        picked = [i for i, o in enumerate(outputs) if floating(o) and o.requires_grad]
        if not picked:
            return []
        cts = grad_outputs([outputs[i] for i in picked], seed + k)
        loops.append(loop_vjp(target, wrt, picked, cts))
        # what the loop's vjp gives, taken from the forward just run rather than running the target again
        expected.append(vjp([outputs[i] for i in picked], [sample[i] for i in wrt], cts))
        cotangents.append(cts)
    stacked_cts = [torch.stack([c[m] for c in cotangents]) for m in range(len(picked))]

    def per_sample(*flat):
        args, cts = list(flat[:len(stacked)]), flat[len(stacked):]

        def f(*xs):
            for i, x in zip(wrt, xs):
                args[i] = x
            outputs = outputs_of(target(*args))
            return tuple(outputs[i] for i in picked)

        _, pull = torch.func.vjp(f, *[args[i] for i in wrt])
        return pull(tuple(cts))

    dims = in_dims + (0,) * len(stacked_cts)
    got, said = transformed("vjp under vmap", kind,
                            lambda: torch.func.vmap(per_sample, in_dims=dims)(*stacked, *stacked_cts))
    if said:
        return [said]
    for k, sample in enumerate(samples):
        measured = measured_noise(loops[k], sample)
        found = noisy_mismatches(f"vjp under vmap (sample {k} of {len(samples)}, in_dims {in_dims}): gradient of "
                                 "input", [g.select(0, k) for g in got], expected[k], tol, lambda m=measured: m()[0])
        if found:
            return found
    return []


def loop_vjp(target, wrt, picked, cotangents):
    """One sample's vjp by autograd, as a function of its arguments: the loop's side of the comparison."""
    def compute(args):
        outputs = outputs_of(target(*args))
        return [vjp([outputs[i] for i in picked], [args[i] for i in wrt], cotangents)]

    return compute


def jacobian_target(target, sample):
    """The target as jacrev and jacfwd differentiate it on ``sample``: a function of the arguments that require
    grad returning the differentiable outputs, complex inputs and outputs as real views (torch.func's Jacobians
    take real functions only); those inputs; and what a message adds where real views stand in. None where
    nothing is differentiable or the dtype is too coarse for finite differences to judge."""
    wrt = [i for i, a in enumerate(sample) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not wrt or sample[wrt[0]].dtype.to_real() not in DIFFERENCE_STEPS:
        return None
    base = detached(sample)
    outputs = outputs_of(target(*sample))
    picked = [i for i, o in enumerate(outputs) if floating(o) and o.requires_grad]
    if not picked:
        return None

    def f(*xs):
        args = list(base)
        for i, x in zip(wrt, xs):
            args[i] = x
        found = outputs_of(target(*args))
        return tuple(found[i] for i in picked)

    real_fn, inputs = realified(f, [base[i] for i in wrt])
    viewed = "" if real_fn is f else (" (complex tensors as real views: flat index 2k is element k's real part, "
                                      "2k + 1 its imaginary part)")
    return (lambda *xs: tuple(outputs_of(real_fn(*xs)))), inputs, viewed


def jacobians(target, kind, sample, forward_ad: bool, proxy_name: str = "", vjp_name: str = "") -> list:
    """jacrev, and jacfwd with ``forward_ad``, against central differences on one sample (:func:`jacobian_target`);
    each column within the differences' tolerance, or that plus the error the outputs' own rounding noise puts
    into a central difference (NOISE_FACTOR times the noise over the step). An entry whose backward is intended
    (``proxy_name`` or ``vjp_name``: not the forward's derivative) is compared with its own eager Jacobian instead."""
    intended = intended_by(proxy_name, vjp_name)
    found = jacobian_target(target, sample)
    if found is None:
        return []
    f, inputs, viewed = found
    with torch.no_grad():
        outputs = f(*inputs)
    numeric = eager_jacobian(f, inputs) if intended else central_jacobian(f, inputs)
    against = f"the eager Jacobian (the backward is intended: {intended})" if intended else \
        "finite differences"
    measured = measured_noise(lambda xs: [list(f(*xs))], [x.detach() for x in inputs])
    argnums = tuple(range(len(inputs)))
    modes = [("jacrev", torch.func.jacrev)] + ([("jacfwd", torch.func.jacfwd)] if forward_ad else [])
    for label, transform in modes:
        jac, said = transformed(label, kind, lambda t=transform: t(f, argnums=argnums)(*inputs))
        if said:
            return [said]
        step, tol = DIFFERENCE_STEPS[inputs[0].dtype]
        problems, zero = [], True
        for (j, e), column in numeric.items():
            for i, expected in enumerate(column):
                got = jacobian_column(jac, i, j, e, outputs[i].shape, inputs[j].numel())
                zero = zero and not bool(got.abs().gt(0).any())
                problem = mismatch(got, expected, tol) and mismatch(
                    got, expected, Tolerance(tol.atol + NOISE_FACTOR * measured()[0] / step, tol.rtol, tol.scale))
                if problem:
                    problems.append(f"{label}: d output {i} / d input {j}[flat {e}] vs {against}: {problem}")
        if problems:
            zeros = zero and label == "jacfwd" and kind == "op"
            family = (JACFWD_ALL_ZERO if zeros else f"{label} vs the eager Jacobian" if intended
                      else {"jacrev": JACREV_VS_DIFFERENCES, "jacfwd": JACFWD_VS_DIFFERENCES}[label])
            said = f"{problems[0]}{viewed}{'; jacfwd gave an all-zero Jacobian' if zeros else ''}"
            return [Finding(f"{said}{bypass_hint('gradient', proxy_name, label, vjp_name)}", family)]
    return []


def transformed(label: str, kind: str, thunk):
    """(``thunk()``, None), or (None, what torch.func's refusal means for an entry of ``kind``) where it refuses the
    target: an old-style Function, no vmap rule, no jvp; any other error raises."""
    try:
        return thunk(), None
    except RuntimeError as exc:
        text = str(exc)
        if is_setup_context_refusal(exc) and kind == "function":
            return None, Finding(f"{label}: torch.func refuses this autograd.Function: it takes ctx in forward (old "
                                 "style). Give it forward(*args) without ctx plus setup_context(ctx, inputs, output), "
                                 "then set generate_vmap_rule = True (pure-torch forward) or write a vmap "
                                 "staticmethod; see https://pytorch.org/docs/stable/notes/extending.func.html",
                                 "torch.func refuses an old-style autograd.Function")
        if is_setup_context_refusal(exc):
            return None, Finding(f"{label}: torch.func refuses an autograd.Function called inside: either an "
                                 "old-style Function (ctx in forward: give it setup_context and a vmap rule) or a "
                                 "torch.library op with register_autograd, which PyTorch builds that way itself (its "
                                 "bug: pytorch/pytorch#168393)", REFUSED_INSIDE)
        if "does not have vmap support" in text:
            return None, Finding(f"{label}: the autograd.Function has no vmap support: set generate_vmap_rule = True "
                                 "(when forward, backward and jvp are pure torch) or write vmap(info, in_dims, *args) "
                                 "-> (output, out_dims)", "no vmap support")
        if "must implement the jvp function" in text:
            return None, Finding(f"{label}: jacfwd needs forward-mode AD: write a jvp(ctx, *tangents) staticmethod "
                                 "using ctx.save_for_forward, or claim supports.forward_ad: false",
                                 "no forward-mode formula")
        raise


def sample_at(subject, case):
    """The target as jacrev and jacfwd differentiate it on the case's first sample (:func:`jacobian_target`)."""
    return jacobian_target(subject.fn, sample_of(subject.args(case), 0, case.in_dims))


#: For an op, torch.func's known bugs are PyTorch's (a skip); a Jacobian that differs from finite differences at a
#: point where the target has no derivative (a kink, a jump) is excused.
CHECK = declared(
    "vmap",
    stages=(Stage(excuses=(KnownBug(CUSTOM_OP_FUNCTORCH, (REFUSED_INSIDE,), "torch.func could not check the op", an_op),
                           KnownBug(CUSTOM_OP_ZERO_JVP, (JACFWD_ALL_ZERO,), "jacfwd gave an all-zero Jacobian", an_op),
                           Kink("vmap ({family})", families=(JACREV_VS_DIFFERENCES, JACFWD_VS_DIFFERENCES),
                                at=sample_at, anywhere=True))),),
    replay=vmap,
    replay_helpers=(sample_of, stacked_samples, vmap_outputs, no_grad_outputs, vmap_vjps, loop_vjp, jacobian_target,
                    jacobians, transformed),
    script_values=lambda subject, case: {**tolerance_values(subject, case), "batch": BATCH,
                                         "forward_ad": subject.entry.supports.forward_ad},
)

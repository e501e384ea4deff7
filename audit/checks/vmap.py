"""``vmap``: torch.func.vmap over a batch equals the per-sample loop, for outputs and for vjps; jacrev
(and jacfwd when forward-mode AD is claimed) equal finite differences."""

from __future__ import annotations

from dataclasses import replace

import torch

from audit.checks import smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.inputs.variants import rearranged
from audit.toolkit import noise, numerical
from audit.toolkit.jacobian import realified
from audit.toolkit.tensors import detached, floating, grad_outputs, mismatch, outputs_of
from audit.toolkit.torch_bugs import CUSTOM_OP_FUNCTORCH, CUSTOM_OP_ZERO_JVP, TorchBugHit, is_setup_context_refusal

#: Samples in the batch; each is the drawn case with its batched tensors' values reordered.
BATCH = 3

OLD_STYLE = ("torch.func refuses this autograd.Function: it takes ctx in forward (old style). Give it "
             "forward(*args) without ctx plus setup_context(ctx, inputs, output), then set generate_vmap_rule "
             "= True (pure-torch forward) or write a vmap staticmethod; see "
             "https://pytorch.org/docs/stable/notes/extending.func.html")
INSIDE = ("torch.func refuses an autograd.Function called inside: either an old-style Function (ctx in "
          "forward: give it setup_context and a vmap rule) or a torch.library op with register_autograd, which "
          "PyTorch builds that way itself (its bug: pytorch/pytorch#168393)")
NO_RULE = ("the autograd.Function has no vmap support: set generate_vmap_rule = True (when forward, backward "
           "and jvp are pure torch) or write vmap(info, in_dims, *args) -> (output, out_dims)")
NO_JVP = ("jacfwd needs forward-mode AD: write a jvp(ctx, *tangents) staticmethod using ctx.save_for_forward, "
          "or claim supports.forward_ad: false")


def run(subject, case) -> None:
    """Outputs and vjps under vmap against the loop, then jacrev/jacfwd against finite differences."""
    batched = {i for i, d in enumerate(case.in_dims) if d is not None}
    samples = [subject.args(rearranged(case, k, batched)) for k in range(BATCH)]
    stacked = [torch.stack([s[i].detach() for s in samples], dim=d) if d is not None else samples[0][i].detach()
               if isinstance(samples[0][i], torch.Tensor) else samples[0][i] for i, d in enumerate(case.in_dims)]
    in_dims = tuple(case.in_dims)
    _outputs(subject, samples, stacked, in_dims)
    _vjps(subject, samples, stacked, in_dims)
    _jacobians(subject, samples[0], case)


def _outputs(subject, samples, stacked, in_dims) -> None:
    fn = subject.target.fn
    with torch.no_grad():
        expected = [outputs_of(fn(*detached(s))) for s in samples]
    got = _transform(subject, "vmap", lambda: torch.func.vmap(_tensors(fn), in_dims=in_dims)(*stacked))
    loop = lambda xs: [_no_grad_outputs(fn, xs)]  # noqa: E731 - the baseline, again on perturbed inputs
    for k in range(BATCH):
        measured = noise.noise(loop, detached(samples[k]))
        noise.compare_within_noise(f"vmap output (sample {k} of {BATCH}, in_dims {in_dims})",
                                   [g.select(0, k) for g in got], expected[k], subject.tolerance(),
                                   lambda: measured()[0])


def _no_grad_outputs(fn, args):
    with torch.no_grad():
        return outputs_of(fn(*args))


def _vjps(subject, samples, stacked, in_dims) -> None:
    """Per-sample vjps under vmap (torch.func.vjp inside torch.func.vmap) against autograd, sample by sample."""
    fn = subject.target.fn
    wrt = [i for i, a in enumerate(samples[0]) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not wrt:
        return
    picked, expected, cotangents, loops = None, [], [], []
    for k, sample in enumerate(samples):
        outputs = outputs_of(fn(*sample))
        picked = [i for i, o in enumerate(outputs) if floating(o) and o.requires_grad]
        if not picked:
            return
        cts = grad_outputs([outputs[i] for i in picked], subject.seed + k)
        loops.append(_loop_vjp(fn, wrt, picked, cts))
        expected.append(loops[-1](sample)[0])
        cotangents.append(cts)
    stacked_cts = [torch.stack([c[m] for c in cotangents]) for m in range(len(picked))]

    def per_sample(*flat):
        args, cts = list(flat[:len(stacked)]), flat[len(stacked):]

        def f(*xs):
            for i, x in zip(wrt, xs):
                args[i] = x
            outputs = outputs_of(fn(*args))
            return tuple(outputs[i] for i in picked)

        _, pull = torch.func.vjp(f, *[args[i] for i in wrt])
        return pull(tuple(cts))

    dims = in_dims + (0,) * len(stacked_cts)
    got = _transform(subject, "vjp under vmap", lambda: torch.func.vmap(per_sample, in_dims=dims)(*stacked, *stacked_cts))
    for k in range(BATCH):
        measured = noise.noise(loops[k], samples[k])
        noise.compare_within_noise(f"vjp under vmap (sample {k} of {BATCH}, in_dims {in_dims}): gradient of input",
                                   [g.select(0, k) for g in got], expected[k], subject.tolerance(),
                                   lambda: measured()[0])


def _loop_vjp(fn, wrt, picked, cotangents):
    """One sample's vjp by autograd, as a function of its arguments: the loop's side of the comparison."""
    def compute(args):
        outputs = outputs_of(fn(*args))
        grads = torch.autograd.grad([outputs[i] for i in picked], [args[i] for i in wrt], cotangents,
                                    allow_unused=True)
        return [[torch.zeros_like(args[i]) if g is None else g for g, i in zip(grads, wrt)]]

    return compute


def _jacobians(subject, sample, case) -> None:
    """jacrev, and jacfwd when forward-mode AD is claimed, against central differences on one sample."""
    wrt = [i for i, a in enumerate(sample) if isinstance(a, torch.Tensor) and a.requires_grad]
    if not wrt or not numerical.supported(sample[wrt[0]].dtype.to_real()):
        return
    base = [a.detach() if isinstance(a, torch.Tensor) else a for a in sample]
    outputs = outputs_of(subject.target.fn(*sample))
    picked = [i for i, o in enumerate(outputs) if floating(o) and o.requires_grad]
    if not picked:
        return

    def f(*xs):
        args = list(base)
        for i, x in zip(wrt, xs):
            args[i] = x
        found = outputs_of(subject.target.fn(*args))
        return tuple(found[i] for i in picked)

    # complex inputs and outputs as real views: jacrev and jacfwd take real functions only
    real_fn, inputs = realified(f, [base[i] for i in wrt])
    viewed = "" if real_fn is f else REAL_VIEWS
    f = lambda *xs: tuple(outputs_of(real_fn(*xs)))
    with torch.no_grad():
        outputs = f(*inputs)
    picked = range(len(outputs))
    numeric = numerical.jacobian(f, inputs)
    measured = noise.noise(lambda xs: [list(f(*xs))], [x.detach() for x in inputs])
    argnums = tuple(range(len(inputs)))
    modes = [("jacrev", torch.func.jacrev)] + ([("jacfwd", torch.func.jacfwd)] if subject.entry.supports.forward_ad else [])
    for label, transform in modes:
        jac = _transform(subject, label, lambda: transform(f, argnums=argnums)(*inputs))
        try:
            _compare_jacobian(subject, label, jac, numeric, [outputs[i] for i in picked], inputs, measured)
        except Violation as exc:
            if smoothness.excused_anywhere(subject, f"vmap ({label} against finite differences)", case, f, inputs):
                return
            raise Violation(f"{exc}{viewed}") from None


#: How a complex tensor's elements are numbered when differenced as a real view.
REAL_VIEWS = " (complex tensors as real views: flat index 2k is element k's real part, 2k + 1 its imaginary part)"


def _compare_jacobian(subject, label, jac, numeric, outputs, inputs, measured) -> None:
    """Each column against central differences, within their tolerance; where that fails, within it plus the
    error the outputs' own rounding noise puts into a central difference (noise / step, ``noise.FACTOR`` times)."""
    tol = numerical.tolerance(inputs[0].dtype)
    zero = True
    problems = []
    for (j, e), column in numeric.items():
        for i, expected in enumerate(column):
            got = numerical.column_of(jac, i, j, e, outputs[i].shape, inputs[j].numel())
            zero = zero and not bool(got.abs().gt(0).any())
            problem = mismatch(got, expected, tol)
            if problem:
                allowed = replace(tol, atol=tol.atol + noise.FACTOR * measured()[0] / numerical.step(inputs[j].dtype))
                problem = mismatch(got, expected, allowed)
            if problem:
                problems.append(f"{label}: d output {i} / d input {j}[flat {e}] vs finite differences: {problem}")
    if problems and zero and label == "jacfwd" and subject.entry.kind == "op":
        raise TorchBugHit(CUSTOM_OP_ZERO_JVP, "jacfwd gave an all-zero Jacobian")
    if problems:
        raise Violation(problems[0])


def _transform(subject, label: str, thunk):
    """Run a torch.func transform, turning its refusals into what they mean for this entry."""
    try:
        return thunk()
    except RuntimeError as exc:
        text = str(exc)
        if is_setup_context_refusal(exc):
            if subject.entry.kind == "op":
                raise TorchBugHit(CUSTOM_OP_FUNCTORCH, f"{label} could not be checked") from None
            if subject.entry.kind == "function":
                raise Violation(f"{label}: {OLD_STYLE}") from None
            raise Violation(f"{label}: {INSIDE}") from None
        if "does not have vmap support" in text:
            raise Violation(f"{label}: {NO_RULE}") from None
        if "must implement the jvp function" in text:
            raise Violation(f"{label}: {NO_JVP}") from None
        raise


def _tensors(fn):
    return lambda *args: tuple(outputs_of(fn(*args)))


SCRIPT = """\
from torch.func import jacfwd, jacrev, vjp, vmap

BATCH = 3


def sample(k):
    \"\"\"Sample k of the batch, as the audit makes it: the drawn values (k = 0), at each batched input reordered
    (odd k: reversed, then rolled by k // 2); fresh leaves.\"\"\"
    xs = []
    for a, d in zip(args, in_dims):
        if torch.is_tensor(a):
            flat = a.detach().reshape(-1)
            if d is not None:
                flat = torch.roll(flat.flip(0) if k % 2 else flat, k // 2)
            a = flat.reshape(a.shape).clone().requires_grad_(a.requires_grad)
        xs.append(a)
    return xs


def transformed(label, thunk):
    try:
        return thunk()
    except RuntimeError as exc:  # torch.func refuses the target (no setup_context, no vmap rule, no jvp...)
        print(f"{label} raised: {(str(exc).strip().splitlines() or [''])[0]}")
        sys.exit(1)


def check(failed):
    if failed:
        sys.exit(1)


plain = lambda xs: [x.detach() if torch.is_tensor(x) else x for x in xs]
samples = [sample(k) for k in range(BATCH)]
stacked = [torch.stack([s[i].detach() for s in samples], dim=d) if d is not None else plain(samples[0])[i]
           for i, d in enumerate(in_dims)]
dims = tuple(in_dims)

# 1. outputs under vmap against the per-sample loop
with torch.no_grad():
    expected = [tensors_of(_target(*plain(s))) for s in samples]
got = transformed("vmap", lambda: vmap(lambda *xs: tuple(tensors_of(_target(*xs))), in_dims=dims)(*stacked))
# within the loop's own rounding noise, measured as the audit measures it (FACTOR times its spread added to atol)
loop = lambda xs: [tensors_of(_target(*plain(xs)))]
check(any(differs(f"vmap output (sample {k} of {BATCH}, in_dims {dims})", [g.select(0, k) for g in got], expected[k],
                  atol + FACTOR * spread(loop, plain(samples[k]))[0]) for k in range(BATCH)))

# 2. per-sample vjps (torch.func.vjp under vmap) against autograd, with the audit's cotangents (seed + k)
wrt = [i for i, a in enumerate(samples[0]) if torch.is_tensor(a) and a.requires_grad]
sample_grads, sample_cts, picked = [], [], []
for k, s in enumerate(samples if wrt else []):
    outs = tensors_of(_target(*s))
    picked = [j for j, o in enumerate(outs) if floating(o) and o.requires_grad]
    if not picked:
        break
    chosen = [outs[j] for j in picked]
    cts = cotangents(chosen, seed + k)
    found = torch.autograd.grad(chosen, [s[i] for i in wrt], cts, allow_unused=True)
    sample_grads.append(filled(found, [s[i] for i in wrt]))
    sample_cts.append(cts)
if picked:
    stacked_cts = [torch.stack([c[m] for c in sample_cts]) for m in range(len(picked))]

    def per_sample(*flat):
        xs, cts = list(flat[:len(stacked)]), flat[len(stacked):]

        def f(*ws):
            for i, w in zip(wrt, ws):
                xs[i] = w
            outs = tensors_of(_target(*xs))
            return tuple(outs[j] for j in picked)

        _, pull = vjp(f, *[xs[i] for i in wrt])
        return pull(tuple(cts))

    got = transformed("vjp under vmap", lambda: vmap(per_sample, in_dims=dims + (0,) * len(stacked_cts))(*stacked, *stacked_cts))
    def loop_vjp(k):
        def compute(xs):
            outs = tensors_of(_target(*xs))
            return [filled(torch.autograd.grad([outs[j] for j in picked], [xs[i] for i in wrt], sample_cts[k],
                                               allow_unused=True), [xs[i] for i in wrt])]
        return compute

    check(any(differs(f"vjp under vmap (sample {k} of {BATCH}, in_dims {dims}): gradient of input",
                      [g.select(0, k) for g in got], sample_grads[k], atol + FACTOR * spread(loop_vjp(k), samples[k])[0])
              for k in range(BATCH)))

# 3. jacrev (and jacfwd when forward_ad is claimed) against central differences on sample 0, first 64 columns
#    (the audit excuses a point without a derivative: a kink or a jump; the stored case is not one)
steps = {torch.float64: (1e-6, 1e-5, 1e-3), torch.float32: (1e-3, 1e-2, 1e-2)}
base = plain(samples[0])
outs = tensors_of(_target(*samples[0]))
picked = [j for j, o in enumerate(outs) if floating(o) and o.requires_grad]
flags = [base[i].is_complex() for i in wrt]  # complex as real views: jacrev and jacfwd take real functions only
if wrt and picked and base[wrt[0]].dtype.to_real() in steps:
    def f(*ws):
        xs = list(base)
        for i, w, c in zip(wrt, ws, flags):
            xs[i] = torch.view_as_complex(w) if c else w
        found = tensors_of(_target(*xs))
        return tuple(torch.view_as_real(found[j].resolve_conj()) if found[j].is_complex() else found[j] for j in picked)

    inputs = [torch.view_as_real(base[i]).clone() if c else base[i] for i, c in zip(wrt, flags)]
    outs = list(f(*inputs))
    picked = range(len(outs))
    eps, jac_atol, jac_rtol = steps[inputs[0].dtype]
    numeric = {}
    with torch.no_grad():
        for j, e in [(j, e) for j, x in enumerate(inputs) for e in range(x.numel())][:64]:
            plus, minus = [x.clone() for x in inputs], [x.clone() for x in inputs]
            plus[j].view(-1)[e] += eps
            minus[j].view(-1)[e] -= eps
            width = plus[j].view(-1)[e] - minus[j].view(-1)[e]  # the step taken, as the audit divides by it
            numeric[(j, e)] = [(p - m) / width for p, m in zip(f(*plus), f(*minus))]
    jac_atol += FACTOR * spread(lambda xs: [list(f(*xs))], inputs)[0] / eps  # the differences' own rounding noise
    for label, transform in [("jacrev", jacrev)] + ([("jacfwd", jacfwd)] if forward_ad else []):  # forward_ad: claimed
        jac = transformed(label, lambda: transform(f, argnums=tuple(range(len(inputs))))(*inputs))
        check(any(differs(f"{label}: d output {i} / d input {j}[flat {e}] vs finite differences",
                          [jac[i][j].reshape(tuple(outs[picked[i]].shape) + (inputs[j].numel(),))[..., e]], [expected],
                          jac_atol, jac_rtol)
                  for (j, e), column in numeric.items() for i, expected in enumerate(column)))
print("vmap, vjp under vmap and the Jacobians agree")
"""


CHECK = declared(
    "vmap",
    run=run,
    script=SCRIPT,
    script_values=lambda subject, case: {**tolerance_values(subject, case), "forward_ad": subject.entry.supports.forward_ad},
)

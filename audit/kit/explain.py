"""A failure in words: the first line of an exception, the user's frame it came from, and torch's gradcheck
failures located element by element and sized."""

from __future__ import annotations

import math
import sys
import torch
from audit.kit.autograd import GradcheckError, filled, grad_outputs, vjp
from audit.kit.compare import number
from audit.kit.jacobians import outputs_without_graph, realified
from audit.kit.tensors import wide


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or "(no message)" (audit.core.errors has its twin for code that must
    import without torch)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def _folder(path: str) -> str:
    """The folder of a file's path, whichever separator it uses."""
    return path[:max(path.rfind("/"), path.rfind("\\"))]


def library_folders() -> tuple:
    """Where the code that is not the user's lives: torch, the standard library (contextlib's folder) and the
    folder of the package this code is in (the audit's; in a replay script, which is ``__main__``, the script's
    folder), then Triton's where it is imported (its interpreter launches a package's kernels: the package's line is
    the one to quote)."""
    own = _folder(library_folders.__code__.co_filename)
    for _ in range(__name__.count(".") - 1):  # audit.kit.explain: audit/kit/ is in audit/
        own = _folder(own)
    triton = getattr(sys.modules.get("triton"), "__file__", None)
    return (_folder(str(torch.__file__)), _folder(str(sys.modules["contextlib"].__file__)), own) + (
        (_folder(str(triton)),) if triton else ())


def user_site(exc: BaseException) -> str:
    """`` (at file:line in function)`` for the innermost frame of ``exc``'s traceback outside
    :func:`library_folders` (else the innermost frame outside the audit's own folder: torch's or the standard
    library's), or "" when it has none: the audit's own files are never quoted as where a target raised."""
    frames, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    folders = library_folders()
    user = [f for f in frames if not f[0].startswith(folders)]
    elsewhere = [f for f in frames if not f[0].startswith(folders[2])]
    chosen = user or elsewhere
    return f" (at {chosen[-1][0]}:{chosen[-1][1]} in {chosen[-1][2]})" if chosen else ""


def explain_gradcheck_failure(fn, inputs, exc: Exception, options: dict) -> str:
    """The largest analytic-vs-numeric difference and where it is, with torch's own first line where it
    says more than that; torch's line alone when nothing is located."""
    said = torch_sentence(exc)
    if any(x.layout != torch.strided for x in inputs):  # torch's masked comparison: located in its own words
        return f"torch.autograd.gradcheck (masked: unspecified elements of sparse inputs ignored): {said}"
    try:
        conjugated = _conjugated(fn, inputs, options["eps"], options["atol"], options["rtol"])
        located = conjugated or _located(fn, inputs, options)
    except Exception:  # the diagnosis is a courtesy; torch's message still stands
        located = None
    if not located:
        return f"torch.autograd.gradcheck: {said}"
    return located if located.startswith(f"{said}:") else f"{located}; torch.autograd.gradcheck: {said}"


def torch_sentence(exc: Exception) -> str:
    """The first line of a torch error as a clause to embed: whitespace collapsed, sentences torch glued
    together ("gradient.The tolerance") parted, and trailing punctuation dropped (torch ends
    "Jacobian mismatch for output 0 with respect to input 0," before its matrices)."""
    lines = str(exc).strip().splitlines()
    first = " ".join(lines[0].split()) if lines else type(exc).__name__
    glued = [i for i in range(1, len(first) - 1)
             if first[i] == "." and "a" <= first[i - 1] <= "z" and "A" <= first[i + 1] <= "Z"]
    for i in reversed(glued):
        first = f"{first[:i]}. {first[i + 1:]}"
    return first.rstrip(" ,;:.")


def judged_by_differences(check: str, fn, inputs, options: dict) -> list:
    """Where a reference cannot judge the target's gradient (undefined or unreliable there), torch's gradcheck
    of ``fn`` (a function of ``inputs``, :func:`wrapped`) with ``options`` does: a line naming that, [] when it
    holds."""
    try:
        torch.autograd.gradcheck(fn, inputs, **options)
    except GradcheckError as exc:
        return [f"{check}: the reference's gradient is undefined or unreliable here (NaN or inf where the target's "
                "is finite, or itself off finite differences), so the target is judged by finite differences, and "
                f"they disagree at a smooth point: {explain_gradcheck_failure(fn, inputs, exc, options)}"]
    return []


def _locate(fn, inputs, eps, atol, rtol) -> str | None:
    found = _worst(fn, inputs, eps, atol, rtol)
    return _said(found, atol, rtol) if found else None


def _worst(fn, inputs, eps, atol, rtol, jacobian=None):
    """The element of the analytic Jacobian (reverse mode; ``jacobian``, e.g. :func:`_forward_analytic`, to take it
    another way) furthest past its allowance from the numeric one: (output, input, flat index in their block,
    analytic value, numeric value, output index, input index), or None where none is past."""
    analytic = (jacobian or _analytic)(fn, inputs)
    numeric = _numeric(fn, inputs, eps)
    worst = None
    for (o, i), a in analytic.items():
        n = numeric[(o, i)]
        excess = _excess(a, n, atol, rtol)
        if excess.numel() and (worst is None or excess.max() > worst[0]):
            flat = int(excess.reshape(-1).argmax())
            worst = (excess.max().item(), o, i, flat, a, n)
    if worst is None or worst[0] <= 0:
        return None
    _, o, i, flat, a, n = worst
    row, col = divmod(flat, a.shape[1])
    return (o, i, flat, a, n, list(_unravel(row, _output_shapes(fn, inputs)[o])), list(_unravel(col, inputs[i].shape)))


def _said(found, atol, rtol, output: str = "output {o}", wrt: str = "input {i}") -> str:
    """:func:`_worst`'s element in words: where, both values, the allowance."""
    o, i, flat, a, n, out_index, in_index = found
    got, want = a.reshape(-1)[flat].item(), n.reshape(-1)[flat].item()
    where = f"Jacobian mismatch for {output.format(o=o)} with respect to {wrt.format(i=i)}:"
    if not math.isfinite(got) or not math.isfinite(want):
        return f"{where} {_non_finite(got, want, f'd out{out_index} / d in[{i}]{in_index}', a, n)}"
    return (f"{where} max |analytic - numeric| = {abs(got - want):.3g} at d out{out_index} / d in{in_index} "
            f"(analytic {got:.6g}, numeric {want:.6g}) > atol {atol:g} + rtol {rtol:g}·|numeric|")


def explain_gradgradcheck_failure(fn, inputs, exc: Exception, options: dict, seed: int = 0) -> str:
    """torch's gradgradcheck failure located as :func:`explain_gradcheck_failure` locates gradcheck's: the
    gradient of <fn(inputs), v> (v drawn from ``seed``) as a function of the inputs and v, its largest analytic-vs-
    numeric difference, both values, the allowance, and whether the numeric value stays when the step is quartered
    (it does: the second derivative is wrong; it moves: finite differences cannot resolve it at this tolerance)."""
    said = torch_sentence(exc)
    xs = [x.detach().requires_grad_() for x in inputs]
    try:
        cotangents = [c.requires_grad_() for c in grad_outputs(_outputs_live(fn, xs), seed)]
        count = len(xs)

        def first(*zs):  # differentiable in the inputs and the cotangents; also called on plain values, shifted
            with torch.enable_grad():
                leaves = [z if z.requires_grad else z.detach().requires_grad_() for z in zs[:count]]
                outs = _outputs_live(fn, leaves)
                grads = vjp(outs, leaves, list(zs[count:]), create_graph=True, fill=False)
            return tuple(filled(grads, leaves))

        at = xs + cotangents
        eps, atol, rtol = options["eps"], options["atol"], options["rtol"]
        found = _worst(first, at, eps, atol, rtol)
        if found is None:
            return f"torch.autograd.gradgradcheck: {said} (not located with the audit's own cotangents)"
        o, i, flat = found[:3]
        finer = _numeric(first, at, eps / 4)[(o, i)].reshape(-1)[flat].item()
    except Exception:  # the diagnosis is a courtesy; torch's message still stands
        return f"torch.autograd.gradgradcheck: {said}"
    analytic, numeric = found[3].reshape(-1)[flat].item(), found[4].reshape(-1)[flat].item()
    wrt = "input {i}" if i < count else f"grad_output {i - count}"
    located = _said(found, atol, rtol, "the gradient of input {o}", wrt)
    steady = _steadiness(analytic, numeric, finer, "the second derivative")
    return f"second derivative: {located}{steady}; torch.autograd.gradgradcheck: {said}"


def explain_forward_ad_failure(fn, inputs, exc: Exception, options: dict) -> str:
    """torch's forward-mode gradcheck failure located as :func:`explain_gradcheck_failure` locates gradcheck's: the
    Jacobian built from the target's jvps (one unit tangent per input element), its largest difference from central
    differences, both values, the allowance, and whether the numeric value stays when the step is quartered (it
    does: the jvp is wrong there; it moves: finite differences cannot resolve it at this tolerance)."""
    said = torch_sentence(exc)
    eps, atol, rtol = options["eps"], options["atol"], options["rtol"]
    try:
        found = _worst(fn, inputs, eps, atol, rtol, jacobian=_forward_analytic)
        if found is None:
            return f"forward-mode AD: {said} (not located element by element)"
        o, i, flat = found[:3]
        finer = _numeric(fn, inputs, eps / 4)[(o, i)].reshape(-1)[flat].item()
    except Exception:  # the diagnosis is a courtesy; torch's message still stands
        return f"forward-mode AD: {said}"
    analytic, numeric = found[3].reshape(-1)[flat].item(), found[4].reshape(-1)[flat].item()
    located = _said(found, atol, rtol).replace("analytic", "jvp")
    steady = _steadiness(analytic, numeric, finer, "the jvp") if math.isfinite(analytic - numeric) else ""
    return f"forward-mode AD: {located}{steady}; torch.autograd.gradcheck: {said}"


def _steadiness(analytic: float, numeric: float, finer: float, what: str) -> str:
    """Whether the numeric value ``finer`` at a quarter of the step stays (``what`` is wrong there) or moves with
    the step (finite differences cannot resolve it at this tolerance), as a clause."""
    if abs(finer - numeric) <= 0.1 * abs(analytic - numeric):
        return f"; numeric {finer:.6g} at a quarter of the step: stable, {what} is wrong there"
    return (f"; numeric {finer:.6g} at a quarter of the step: it moves with the step, so finite differences cannot "
            f"resolve it at this tolerance (a tolerance question, not a wrong {what.removeprefix('the ')})")


def _forward_analytic(fn, inputs) -> dict:
    """:func:`_analytic`'s blocks taken by forward-mode AD: column k of block (o, i) is the tangent of output o for
    the unit tangent on element k of input i (zero tangents elsewhere)."""
    import torch.autograd.forward_ad as fwad

    base = [x.detach() for x in inputs]
    columns: dict = {}
    for i, x in enumerate(base):
        for k in range(x.numel()):
            with fwad.dual_level():
                duals = [fwad.make_dual(y, torch.zeros_like(y).view(-1).index_fill_(0, torch.tensor(k), 1.0)
                                        .view_as(y) if j == i else torch.zeros_like(y))
                         for j, y in enumerate(base)]
                out = fn(*duals)
                for o, y in enumerate(out if isinstance(out, tuple) else (out,)):
                    tangent = fwad.unpack_dual(y).tangent
                    column = (torch.zeros(y.numel(), dtype=torch.float64) if tangent is None
                              else wide(tangent.detach()).reshape(-1))
                    columns.setdefault((o, i), []).append(column)
    shapes = _output_shapes(fn, inputs)
    return {(o, i): (torch.stack(columns[(o, i)], dim=1) if (o, i) in columns
                     else torch.zeros(math.prod(shapes[o]), 0, dtype=torch.float64))
            for o in range(len(shapes)) for i in range(len(base))}


def _excess(a, n, atol: float, rtol: float):
    """How far each analytic element is past its allowance; a NaN or an infinity on one side only is
    infinitely far (first to be named), equal values (equal infinities too) are not past it."""
    excess = ((a - n).abs() - (atol + rtol * n.abs())).nan_to_num(nan=math.inf)
    return excess.masked_fill(a == n, -math.inf)


def _non_finite(got: float, want: float, where: str, a, n) -> str:
    """"analytic NaN at d out[0] / d in[2][1]; numeric 0.37", and how many elements are so."""
    side, value, other, other_value, block = (("analytic", got, "numeric", want, a) if not math.isfinite(got)
                                              else ("numeric", want, "analytic", got, n))
    count = int((~torch.isfinite(block)).sum())
    hint = ("" if side == "analytic" else
            ": the function is not finite within eps of this point (a domain edge?); narrow `domain`")
    return (f"{side} {number(value)} at {where}; {other} {number(other_value)} ({count} of {block.numel()} "
            f"{side} elements of this block are not finite){hint}")


def _located(fn, inputs, options: dict) -> str | None:
    """:func:`_locate` on the real view of ``fn``, saying how a complex element's index reads."""
    real_fn, real_inputs = realified(fn, inputs)
    found = _locate(real_fn, real_inputs, options["eps"], options["atol"], options["rtol"])
    if found and real_fn is not fn:
        found += " (complex tensors seen as real views: a last index 0 is the real part, 1 the imaginary part)"
    return found


def _conjugated(fn, inputs, eps, atol, rtol) -> str | None:
    """For a complex input whose gradient is the conjugate of the finite-difference one (and not that one): a
    message naming PyTorch's convention. Compared as one vector-Jacobian product with random cotangents, the
    numeric side being dL/da + i·dL/db for the real loss L = Re<cotangents, outputs> of z = a + ib."""
    if not any(x.is_complex() for x in inputs):
        return None
    xs = [x.detach().requires_grad_() for x in inputs]
    outs = _outputs_live(fn, xs)
    cots = grad_outputs(outs, 0)
    analytic = vjp(outs, xs, cots)

    def loss(*ys):
        return sum(float((c.conj() * o).real.sum()) for o, c in zip(outputs_without_graph(fn, ys), cots))

    def close(got, a) -> bool:
        return bool(((got - a).abs() <= atol + rtol * a.abs()).all())

    for i, (x, got) in enumerate(zip(inputs, analytic)):
        if not x.is_complex():
            continue
        numeric = _wirtinger(loss, [y.detach() for y in inputs], i, eps)
        if not close(got, numeric) and close(got, numeric.conj()):
            return (f"the gradient with respect to input {i} looks conjugated: it equals the conjugate of the "
                    f"finite-difference gradient (max |analytic - numeric| = {float((got - numeric).abs().max()):.3g}, "
                    f"max |analytic - conj(numeric)| = {float((got - numeric.conj()).abs().max()):.3g}); PyTorch's "
                    "convention for complex inputs is the conjugate Wirtinger one, grad = g * conj(df/dz) for a "
                    "holomorphic f (for a real loss L of z = a + ib, grad = dL/da + i·dL/db): return the conjugate "
                    "of what backward returns now (for |z|^2, 2 * g * z, not 2 * g * z.conj())")
    return None


def _outputs_live(fn, xs) -> list:
    """The outputs of ``fn(*xs)`` that carry a gradient."""
    found = fn(*xs)
    return [o for o in (found if isinstance(found, tuple) else (found,)) if o.requires_grad]


def _wirtinger(loss, base, i: int, eps: float):
    """dL/da + i·dL/db for each element of input ``i`` (a = real part, b = imaginary part), by central differences."""
    x = base[i]
    result = torch.zeros(x.numel(), dtype=torch.complex128)
    for k in range(x.numel()):
        for unit in (1.0, 1j):  # a step along the real part gives dL/da, along the imaginary part i·dL/db
            plus, minus = ([y.clone() for y in base] for _ in range(2))
            plus[i].view(-1)[k] += eps * unit
            minus[i].view(-1)[k] -= eps * unit
            result[k] += unit * (loss(*plus) - loss(*minus)) / (2 * eps)
    return result.reshape(x.shape).to(x.device)


def _output_shapes(fn, inputs):
    with torch.no_grad():
        out = fn(*[x.detach() for x in inputs])
    return [o.shape for o in (out if isinstance(out, tuple) else (out,))]


def _unravel(flat: int, shape) -> tuple:
    if not shape:
        return ()
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape)))


def _analytic(fn, inputs) -> dict:
    xs = [x.detach().requires_grad_() for x in inputs]
    out = fn(*xs)
    outputs = list(out) if isinstance(out, tuple) else [out]
    result = {}
    for o, y in enumerate(outputs):
        rows = [[torch.zeros(x.numel(), dtype=torch.float64) for x in xs] for _ in range(y.numel())]
        for r in range(y.numel()):
            seed = torch.zeros(y.numel(), dtype=y.dtype).index_fill_(0, torch.tensor(r), 1.0).view_as(y)
            if not y.requires_grad:
                continue
            grads = vjp(y, xs, seed, retain_graph=True, fill=False)
            for i, g in enumerate(grads):
                if g is not None:
                    rows[r][i] = wide(g.detach()).reshape(-1)
        for i, x in enumerate(xs):
            result[(o, i)] = torch.stack([row[i] for row in rows]) if rows else torch.zeros(0, x.numel())
    return result


def _numeric(fn, inputs, eps) -> dict:
    result = {}
    base = [x.detach().clone() for x in inputs]
    for i, x in enumerate(base):
        columns = []
        for k in range(x.numel()):
            plus, minus = _shifted(fn, base, i, k, eps), _shifted(fn, base, i, k, -eps)
            columns.append([((p - m) / (2 * eps)).double().reshape(-1) for p, m in zip(plus, minus)])
        for o in range(len(_shifted(fn, base, i, None, 0.0))):
            result[(o, i)] = torch.stack([c[o] for c in columns], dim=1) if columns else torch.zeros(0, 0)
    return result


def _shifted(fn, base, i, k, delta):
    xs = [x.clone() for x in base]
    if k is not None:
        xs[i].view(-1)[k] += delta
    with torch.no_grad():
        out = fn(*xs)
    return list(out if isinstance(out, tuple) else (out,))

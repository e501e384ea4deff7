"""The replay kit: every helper a check's property and its replay script use, in plain torch.

One module, importing nothing but torch (and the standard library), so that a replay script can carry its
whole source (:func:`audit.engine.script.replay_script` embeds it with ``inspect.getsource``) and still need
nothing but torch and the target's package. The audit's checks call these same functions: what a script
prints is what the cell found, computed by the same code. A check's property is one function of this shape::

    def property(fn, ref, args, *, seed, atol, rtol, scale, ...) -> list[str]   # [] when it holds

where ``fn`` is the target called as the audit calls it (:func:`guarded`), ``ref`` the reference (or None) and
``args`` the case's arguments. Keep this module free of any import from ``audit``: a test holds it to that.
"""

from __future__ import annotations

import contextlib
import math
import sys
import threading

import torch
from torch.utils._python_dispatch import TorchDispatchMode


# -- tensors -----------------------------------------------------------------------------------------------------

def outputs_of(result) -> list:
    """The tensors a call returned, in order (a tensor, or the tensors of a tuple or list)."""
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (tuple, list)):
        return [r for r in result if isinstance(r, torch.Tensor)]
    return []


def detached(args) -> list:
    """``args`` with every tensor detached (other values as they are)."""
    return [a.detach() if isinstance(a, torch.Tensor) else a for a in args]


def floating(tensor) -> bool:
    """Whether autograd differentiates ``tensor``'s dtype: real floating or complex."""
    return tensor.is_floating_point() or tensor.is_complex()


def widest(tensor):
    """The dtype to compare ``tensor`` in: complex128 for a complex one, else float64."""
    return torch.complex128 if tensor.is_complex() else torch.float64


def wide(tensor):
    """``tensor`` in float64, or in complex128 if complex: where comparisons are made."""
    return tensor.to(widest(tensor))


def widened(args) -> list:
    """``args`` with every floating tensor detached and in its comparison dtype: how a reference is called."""
    return [wide(a.detach()) if isinstance(a, torch.Tensor) and floating(a) else a for a in args]


def dense(x):
    """``x`` as a strided tensor: a sparse one with zeros where it specifies nothing, a dense one as it is."""
    return x if x.layout == torch.strided else x.to_dense()


def differentiable(tensors) -> list:
    """The floating (or complex) tensors that take part in autograd."""
    return [t for t in tensors if floating(t) and t.requires_grad]


def grad_inputs(args) -> list:
    """The arguments a gradient is taken with respect to."""
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]


def grad_outputs(outputs, seed: int) -> list:
    """Deterministic random cotangents, one per output, in each output's dtype and device: drawn from ``seed`` in
    float64, in complex128 for a complex output (a real cotangent would leave its imaginary part unexamined)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randn(o.shape, generator=generator, dtype=widest(o)).to(o.dtype).to(o.device) for o in outputs]


def filled(grads, inputs) -> list:
    """Gradients with each ``None`` (input unused) replaced by zeros of the input's shape."""
    return [torch.zeros_like(x) if g is None else g for g, x in zip(grads, inputs)]


def gradients(outputs, args, seed: int) -> list:
    """Gradients of <differentiable outputs, random cotangents> for each argument that requires grad (zeros where
    unused); empty when nothing is differentiable."""
    inputs, chosen = grad_inputs(args), differentiable(outputs)
    if not (inputs and chosen):
        return []
    return filled(torch.autograd.grad(chosen, inputs, grad_outputs(chosen, seed), allow_unused=True), inputs)


def fresh(args) -> list:
    """New leaves with the values of ``args`` (requires_grad kept), so that a target writing its arguments cannot
    change the next call; a transposed layout is kept, a strided or offset one not."""
    return [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]


def laid_out(x, layout: str):
    """The same values in the named memory layout (transposed, strided, offset, channels_last), a leaf requiring
    grad as ``x`` does; never stride 0. "contiguous", or a layout the shape cannot take, keeps ``x``'s."""
    grad = x.requires_grad
    x = x.detach()
    shape = tuple(x.shape)
    if layout == "transposed" and len(shape) >= 2:
        dims = list(reversed(range(len(shape))))
        y = torch.empty(shape[::-1], dtype=x.dtype, device=x.device).permute(*dims)
    elif layout == "strided" and shape:
        y = torch.zeros(shape[:-1] + (2 * shape[-1],), dtype=x.dtype, device=x.device)[..., ::2]
    elif layout == "offset":  # the gaps are zeros: code that ignores strides reads the same values in every run
        y = torch.zeros(x.numel() + 3, dtype=x.dtype, device=x.device)[3:].view(shape)
    elif layout == "channels_last" and len(shape) == 4:
        y = torch.empty(shape, dtype=x.dtype, device=x.device).contiguous(memory_format=torch.channels_last)
    else:
        return x.requires_grad_(grad)
    with torch.no_grad():
        y.copy_(x)
    return y.requires_grad_(grad)


def cotangents_laid_out(cotangents, layout: str) -> list:
    """Cotangents in the layout a check hands to backward: "expanded" (stride 0: one value broadcast), "expanded
    values" (that value, dense), or a memory layout (a 1-d one offset: it cannot be transposed)."""
    if layout in ("expanded", "expanded values"):
        found = [c.reshape(-1)[:1].expand(c.shape) if c.numel() and c.dim() else c for c in cotangents]
        return [c.contiguous() for c in found] if layout == "expanded values" else found
    return [laid_out(c, layout if c.dim() >= (2 if layout == "transposed" else 1) else "offset") for c in cotangents]


def grads(f, args, seed: int, layout: str | None = None):
    """Floating outputs of ``f(*args)`` (detached) and the gradients of <outputs, cotangents drawn from ``seed``> for
    the arguments that require grad (zeros where unused); ``layout`` lays the cotangents out
    (:func:`cotangents_laid_out`)."""
    outs = [o for o in outputs_of(f(*args)) if floating(o)]
    live = differentiable(outs)
    cots = grad_outputs(live, seed)
    if layout is not None:
        cots = cotangents_laid_out(cots, layout)
    inputs = grad_inputs(args)
    found = torch.autograd.grad(live, inputs, cots, allow_unused=True) if live and inputs else []
    return [o.detach() for o in outs], filled(found, inputs)


# -- calls -------------------------------------------------------------------------------------------------------

def guarded(f, mutates=(), seed=None):
    """``f`` called as the audit calls a target: each leaf tensor at a ``mutates`` position replaced by its clone
    (the audit's tensors are never written), and, with a ``seed``, torch's generator reset to it first. A module
    ``f`` stays reachable as ``.module`` (:func:`module_of`: its parameters are gradcheck's too)."""
    def call(*args):
        args = [a.clone() if i in mutates and isinstance(a, torch.Tensor) and a.is_leaf else a
                for i, a in enumerate(args)]
        if seed is not None:
            torch.manual_seed(seed)
        return f(*args)
    call.module = f if isinstance(f, torch.nn.Module) else module_of(f)
    return call


# -- comparison --------------------------------------------------------------------------------------------------

class Finding(str):
    """A property's message that also says what kind of failure it is, without by how much: ``kind`` with where
    ("output 0", "gradient of input 1"), into which the audit shrinks a failure (only cases of the same kind), and
    ``family`` without where ("gradient of input"): what a check's judgement decides by, so that no verdict reads a
    message's wording (the constants below name the families a judgement keys on)."""

    kind: str
    family: str

    def __new__(cls, message: str, kind: str, family: str = ""):
        found = super().__new__(cls, message)
        found.kind, found.family = kind, family or kind
        return found

    def worded(self, message: str) -> Finding:
        """The same finding said in other words (more said around it, a mode named)."""
        return Finding(message, self.kind, self.family)


#: Families of findings that a check's judgement decides by (:class:`Finding`): a Jacobian against finite
#: differences (a point without a derivative may excuse it), jacfwd's all-zero Jacobian, torch.func refusing an
#: autograd.Function called inside the target (for an op: PyTorch's own bug), a jvp off finite differences or off
#: the reference's, and a compiled gradient off eager's.
JACREV_VS_DIFFERENCES = "jacrev vs finite differences"
JACFWD_VS_DIFFERENCES = "jacfwd vs finite differences"
JACFWD_ALL_ZERO = "jacfwd gave an all-zero Jacobian"
REFUSED_INSIDE = "torch.func refuses an autograd.Function called inside"
FORWARD_AD_MISMATCH = "forward-mode AD"
COMPILED_GRADIENT = "compiled gradient of input"


def mismatch(got, expected, tol, magnitude: float = 0.0) -> str | None:
    """Why ``got`` is not close to ``expected`` (largest error and where), or None when it is; sparse tensors
    compare by their dense values. ``tol`` has ``atol``, ``rtol`` and ``scale``: the allowance is
    atol + scale·max(max|expected|, magnitude) + rtol·|expected| (``magnitude``: the largest value the computation
    passed through, :func:`largest_value`, where measured)."""
    got, expected = dense(got), dense(expected)
    if got.shape != expected.shape:
        return f"shape {list(got.shape)} != expected {list(expected.shape)}"
    if got.numel() == 0:
        return None
    kind = torch.complex128 if got.is_complex() or expected.is_complex() else torch.float64
    got64, exp64 = got.detach().to(kind).cpu(), expected.detach().to(kind).cpu()  # complex: |difference| is the modulus
    if within(got64, exp64, tol, magnitude):
        return None
    nan_mismatch = torch.isnan(got64) != torch.isnan(exp64)
    if nan_mismatch.any():
        return _nan_mismatch(got64, exp64, nan_mismatch, got.shape)
    same = (torch.isnan(got64) & torch.isnan(exp64)) | (got64 == exp64)  # equal infinities are equal
    error = (got64 - exp64).abs().masked_fill(same, 0.0).nan_to_num(nan=float("inf"))
    size = exp64.abs().nan_to_num(nan=0.0, posinf=0.0)
    own = size.max().item() if tol.scale else 0.0
    floor = tol.atol + tol.scale * max(own, magnitude)
    excess = (error - (floor + tol.rtol * size)).masked_fill(same, -1.0)
    if not (excess > 0).any():
        return None
    flat = excess.reshape(-1).argmax()
    return (f"max |got - expected| = {error.reshape(-1)[flat].item():.3g} at index {_index(excess, got.shape)} "
            f"(got {got64.reshape(-1)[flat].item():.6g}, expected {exp64.reshape(-1)[flat].item():.6g}); "
            f"allowed {_allowance(tol, floor, magnitude > own)} + rtol {tol.rtol:g}·|expected|")


def within(got64, exp64, tol, magnitude: float = 0.0) -> bool:
    """The common case of :func:`mismatch` in a few operations: every element within its allowance and every
    expected value finite. False sends the comparison the full way, which treats NaN and infinities (equal ones
    are equal, one-sided NaN is named) and says where the largest error is; it never turns a failure into a
    pass, since its allowance is the same and a finite expected tensor is all it accepts."""
    size = exp64.abs()
    largest = size.max().item()
    if not math.isfinite(largest):
        return False
    allowed = tol.atol + tol.scale * max(largest if tol.scale else 0.0, magnitude) + tol.rtol * size
    return bool(((got64 - exp64).abs() <= allowed).all())


def _allowance(tol, floor: float, of_run: bool) -> str:
    """The absolute part of the allowance, with its scale term when there is one."""
    if not tol.scale:
        return f"atol {tol.atol:g}"
    of = "the largest value computed in float64" if of_run else "max|expected|"
    return f"atol {tol.atol:g} + scale {tol.scale:g}·{of} (= {floor:.3g})"


def _nan_mismatch(got64, exp64, where, shape) -> str:
    """Which side is NaN where the other is not, at the first such element, and how many there are."""
    flat = int(where.reshape(-1).int().argmax())
    got_value, expected_value = (number(t.reshape(-1)[flat].item()) for t in (got64, exp64))
    return (f"got {got_value} where expected {expected_value} at index {_index(where.int(), shape)} "
            f"(NaN on one side only in {int(where.sum())} of {where.numel()} elements)")


def number(value) -> str:
    """A float as a message shows it: NaN, or 6 significant digits."""
    return "NaN" if value != value else f"{value:.6g}"


def _index(scores, shape) -> tuple:
    flat = int(scores.reshape(-1).argmax())
    return tuple(int(i) for i in torch.unravel_index(torch.tensor(flat), tuple(shape))) if shape else ()


def mismatches(label: str, got, expected, tol, magnitude: float = 0.0) -> list:
    """One line per tensor of ``got`` not close to ``expected`` ("<label> <i>: <why>"), or for a count that
    differs; [] when all are close (``magnitude``: see :func:`mismatch`)."""
    if len(got) != len(expected):
        return [f"{label}: {len(got)} tensors, expected {len(expected)}"]
    found = [(i, mismatch(g, e, tol, magnitude)) for i, (g, e) in enumerate(zip(got, expected))]
    return [Finding(f"{label} {i}: {problem}", f"{label} {i}", label) for i, problem in found if problem]


class Tol:
    """An allowance (``atol + scale·max|expected| + rtol·|expected|``) where a script has no registry Tolerance."""

    def __init__(self, atol: float, rtol: float, scale: float = 0.0):
        self.atol, self.rtol, self.scale = atol, rtol, scale

    def __repr__(self) -> str:
        return f"Tol({self.atol!r}, {self.rtol!r}, {self.scale!r})"


# -- the failure of a call, in words --------------------------------------------------------------------------

def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or "(no message)" (audit.errors has its twin for code that must
    import without torch)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else "(no message)"


def _folder(path: str) -> str:
    """The folder of a file's path, whichever separator it uses."""
    return path[:max(path.rfind("/"), path.rfind("\\"))]


def library_folders() -> tuple:
    """Where the code that is not the user's lives: torch, the standard library (contextlib's folder) and this
    kit's own folder (the audit's package; in a replay script, the script's folder)."""
    files = (torch.__file__, sys.modules["contextlib"].__file__, library_folders.__code__.co_filename)
    return tuple(_folder(str(path)) for path in files)


def user_site(exc: BaseException) -> str:
    """`` (at file:line in function)`` for the innermost frame of ``exc``'s traceback outside
    :func:`library_folders` (else the innermost frame), or "" when it has none."""
    frames, tb = [], exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        frames.append((code.co_filename, tb.tb_lineno, code.co_name))
        tb = tb.tb_next
    own = [f for f in frames if not f[0].startswith(library_folders())]
    frame = (own or frames)[-1] if frames else None
    return f" (at {frame[0]}:{frame[1]} in {frame[2]})" if frame else ""


class Inapplicable(Exception):
    """Raised by a property that has nothing to say about a case (the audit's cell is then a skip, saying why)."""


# -- a target of its differentiable inputs; gradients; a module target -----------------------------------------

#: torch's gradcheck failure (its module's name is shadowed by the function ``torch.autograd.gradcheck``).
GradcheckError = sys.modules["torch.autograd.gradcheck"].GradcheckError

#: Why a gradient property has nothing to compare.
NO_GRADIENT_OUTPUT = "returned no differentiable output: nothing carries a gradient back"


def module_of(fn):
    """The nn.Module that the target ``fn`` calls (``fn.module``: :func:`guarded` keeps it), or None."""
    module = getattr(fn, "module", None)
    return module if isinstance(module, torch.nn.Module) else None


def wrapped(fn, args):
    """``fn`` as a function of the arguments that require grad only (the others fixed to ``args``'), returning its
    floating outputs, dense (a sparse output made dense: masked, its gradient stays on its pattern), as torch's
    gradcheck asks: one tensor, or a tuple of them."""
    positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.requires_grad]

    def of_inputs(*inputs):
        full = list(args)
        for i, x in zip(positions, inputs):
            full[i] = x
        outputs = [dense(o) for o in outputs_of(fn(*full)) if floating(o)]
        return tuple(outputs) if len(outputs) != 1 else outputs[0]

    return of_inputs


def outputs_and_gradients(fn, args, seed: int):
    """The differentiable outputs of ``fn(*args)`` and the gradients of <outputs, cotangents drawn from ``seed``>
    for the arguments that require grad (zeros where unused); no outputs (see :data:`NO_GRADIENT_OUTPUT`) and no
    gradients when none is differentiable."""
    outputs = differentiable(outputs_of(fn(*args)))
    return outputs, gradients(outputs, args, seed)


def once(compute):
    """A callable giving ``compute()``, computed on the first call only."""
    found = []

    def value():
        if not found:
            found.append(compute())
        return found[0]

    return value


# -- torch's gradcheck failure, located and sized ----------------------------------------------------------------

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
                grads = torch.autograd.grad(outs, leaves, list(zs[count:]), create_graph=True, allow_unused=True)
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
    analytic = filled(torch.autograd.grad(outs, xs, cots, allow_unused=True), xs)

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
            grads = torch.autograd.grad(y, xs, seed, retain_graph=True, allow_unused=True)
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


# -- kind model: micro-batches ---------------------------------------------------------------------------------

def micro_batches(batch, parts: int) -> list:
    """``(inputs, targets)`` split into ``parts`` micro-batches along dim 0 (anything not a tensor repeated)."""
    inputs, targets = batch
    split_inputs = [x.chunk(parts) if isinstance(x, torch.Tensor) else [x] * parts for x in inputs]
    split_targets = targets.chunk(parts) if isinstance(targets, torch.Tensor) else [targets] * parts
    return [(tuple(s[i] for s in split_inputs), split_targets[i]) for i in range(parts)]


# -- low precision: the largest value a computation passes through ------------------------------------------------

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


# -- low precision: judged by the error the same computation makes in that precision -----------------------------

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
    found = (torch.autograd.grad(live, inputs, cotangents_in(live, seed, dtype), allow_unused=True)
             if live and inputs else [])
    return [o.detach() for o in outs], filled(found, inputs)


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
                         magnitude: float = 0.0) -> list:
    """One line per tensor of ``got`` (labelled "<label> <i>") whose error from ``truth`` exceeds
    OWN_ERROR_RATIO times ``own``'s (the reference in ``dtype``; None: the truth rounded to ``dtype``) plus
    OWN_ERROR_FLOOR roundings of its largest true value; or that is inf or NaN where the truth, rounded to
    ``dtype``, is finite (``inputs`` says what produced it: :func:`value_range`). ``ratios``, if given, receives
    "<label> <i>" -> the target's error over the reference's (over the floor where the reference's is smaller).
    The floor also holds two float32 roundings of ``magnitude`` (the inputs' largest value): kernels compute in
    float32, and a result that cancels (to zero, or below its operands) carries their rounding, not its own.
    Elements where the reference in ``dtype`` is not finite are not compared (it says nothing there)."""
    if len(got) != len(truth):
        return [f"{label}: {len(got)} tensors, expected {len(truth)}"]
    own = own if own is not None and len(own) == len(truth) else [t.to(dtype) for t in truth]
    found = []
    for i, (g, t, o) in enumerate(zip(got, truth, own)):
        problem = own_error_mismatch(g, t, o, dtype, ratios, f"{label} {i}", inputs, magnitude)
        if problem:
            found.append(Finding(f"{label} {i}: {problem}", f"{label} {i}", label))
    return found


def own_error_mismatch(got, truth, own, dtype, ratios=None, name: str = "", inputs: str = "",
                       magnitude: float = 0.0) -> str | None:
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
    measure = (f"the reference's error in {name}" if reference >= floor else
               f"two roundings of max|true| {largest:.3g} and of the inputs' {magnitude:.3g} in float32: the "
               f"reference's error in {name} is {reference:.3g}")
    times = f"{mine / yardstick:.3g}x" if yardstick else "more than"
    return (f"error {mine:.3g} = {times} {name}'s own {yardstick:.3g} for this computation ({measure};"
            f" allowed {ratio:g}x the reference's + those roundings = {allowed:.3g}) at index "
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


# -- two computations of the same value: their rounding noise, measured (see audit.toolkit.noise) --------------

#: How many times the measured spread two computations may differ by, beyond the fixed tolerance.
NOISE_FACTOR = 16
#: Seeded steps per measurement (each evaluated on both sides: 2 evaluations).
NOISE_SAMPLES = 2
#: A step's size in units of the dtype's eps times the input's largest magnitude: a few ulps or more of every
#: element, so that each evaluation rounds on its own, and small enough that curvature adds nothing.
NOISE_STEP = 64


def spread(compute, args):
    """For each group of tensors ``compute(args)`` returns (say outputs, then gradients), the largest second
    difference f(x + d) - 2 f(x) + f(x - d) of any of its elements over NOISE_SAMPLES seeded steps ``d`` of up to
    NOISE_STEP units of the dtype's eps times max|x| per element: the slope cancels, the rounding noise of three
    evaluations at distinct points (and the amplification of an ill-conditioned point) stays."""
    base = compute(args)
    worst = [0.0] * len(base)
    for sample in range(NOISE_SAMPLES):
        up, down = compute(perturbed(args, sample, 1.0)), compute(perturbed(args, sample, -1.0))
        for g, group in enumerate(base):
            for a, b, c in zip(up[g], group, down[g]):
                a, b, c = (t.to_dense() if t.layout != torch.strided else t for t in (a, b, c))
                if a.shape == b.shape == c.shape and b.numel():
                    second = (a.detach().double() - 2 * b.detach().double() + c.detach().double()).abs()
                    worst[g] = max(worst[g], float(second.nan_to_num(nan=0.0, posinf=0.0).max()))
    return worst


def perturbed(args, sample, sign=1.0):
    """``args`` with each floating strided tensor moved by ``sign`` times a seeded uniform step of up to
    NOISE_STEP·eps·max|x| per element, in its own layout, a leaf requiring grad as the original does; anything
    else as it is."""
    generator = torch.Generator().manual_seed(sample)
    moved = []
    for a in args:
        if not (torch.is_tensor(a) and (a.is_floating_point() or a.is_complex()) and a.layout == torch.strided
                and a.numel()):
            moved.append(a)
            continue
        x = a.detach().clone()  # keeps the strides of a non-contiguous input
        size = sign * NOISE_STEP * float(x.abs().max().double().cpu()) * torch.finfo(x.dtype).eps
        step = (torch.rand(x.shape, generator=generator, dtype=torch.float64) * 2 - 1) * size
        with torch.no_grad():
            x.add_(step.to(device=x.device, dtype=x.real.dtype if x.is_complex() else x.dtype))
        moved.append(x.requires_grad_(a.requires_grad))
    return moved


def noisy_mismatches(label: str, got, expected, tol, measured) -> list:
    """:func:`mismatches`; where some fail, again with NOISE_FACTOR times ``measured()`` (the group's spread, a
    float) added to atol, each remaining line saying so."""
    found = mismatches(label, got, expected, tol)
    if not found or len(got) != len(expected):
        return found
    width = measured()
    wider = Tol(tol.atol + NOISE_FACTOR * width, tol.rtol, tol.scale)
    return [line.worded(f"{line} (atol includes {NOISE_FACTOR}x the rounding noise measured here, {width:.3g}: the "
                        f"second difference of the results over steps of {NOISE_STEP} eps in the inputs)")
            for line in mismatches(label, got, expected, wider)]


# -- a reference that says nothing somewhere -----------------------------------------------------------------------

def undefined_where(got, expected):
    """Where ``expected`` (the reference's) is NaN or inf and ``got`` (the target's) is finite, as a bool tensor
    (a 0-d False where the shapes differ: that mismatch is the comparison's to report)."""
    got, expected = dense(got), dense(expected)
    if got.shape != expected.shape:
        return torch.zeros((), dtype=torch.bool)
    return ~torch.isfinite(expected.detach().cpu()) & torch.isfinite(got.detach().cpu())


def defined_only(got, expected, observe=None, label: str = "") -> list:
    """``expected`` with ``got``'s element wherever the reference is undefined (:func:`undefined_where`): an
    inconclusive comparison there, so none is made. ``observe(label, got, expected, masks)``, if given, is told
    where that happened (the audit counts such examples in the cell's metrics)."""
    masks = [undefined_where(g, e) for g, e in zip(got, expected)]
    if observe is not None and any(m.any() for m in masks):
        observe(label, got, expected, masks)
    kept = []
    for g, e, mask in zip(got, expected, masks):
        if mask.any():
            e = torch.where(mask.to(e.device), g.detach().to_dense().to(e.dtype), e.to_dense())
        kept.append(e)
    return kept


# -- sparse inputs -------------------------------------------------------------------------------------------------

def sparse_from(values, pattern, layout: str):
    """The elements of ``values`` where ``pattern`` is True (explicit zeros included), as a coalesced sparse
    tensor of ``layout`` (sparse_coo or sparse_csr), specified in row-major order."""
    coo = torch.sparse_coo_tensor(pattern.nonzero().t(), values[pattern], values.shape, is_coalesced=True,
                                  check_invariants=True)
    return coo if layout == "sparse_coo" else coo.to_sparse_csr()


def specified(x):
    """A bool tensor of ``x``'s shape: True where sparse ``x`` specifies an element (everywhere when dense)."""
    if x.layout == torch.strided:
        return torch.ones(x.shape, dtype=torch.bool, device=x.device)
    coo = x.detach().to_sparse_coo().coalesce()
    mask = torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    mask[tuple(coo.indices())] = True
    return mask


def sparse_gradient_problem(index: int, x, grad) -> str:
    """Why ``grad`` cannot be the gradient of sparse input ``x`` ("" when it can, or when ``x`` is dense): it must
    have ``x``'s layout and no nonzero value outside ``x``'s pattern (masked semantics: the gradient lives on the
    specified elements only, and ``x.grad`` keeps ``x``'s layout)."""
    if x.layout == torch.strided or grad is None:
        return ""
    expected = str(x.layout).replace("torch.", "")
    got = "strided (dense)" if grad.layout == torch.strided else str(grad.layout).replace("torch.", "")
    fix = (f"return a {expected} gradient with the input's pattern, e.g. the dense gradient sampled there: "
           "dense_grad.sparse_mask(x)")
    if grad.layout != x.layout:
        return f"gradient of sparse input {index} came back {got}, expected {expected} (the input's layout); {fix}"
    outside = (grad.detach().to_dense() != 0) & ~specified(x)
    if outside.any():
        where = tuple(int(i) for i in outside.nonzero()[0])
        return (f"gradient of sparse input {index} has {int(outside.sum())} nonzero value(s) outside the input's "
                f"pattern ({int(specified(x).sum())} of {x.numel()} elements specified), e.g. at index {where}; {fix}")
    return ""


def sparse_gradient_problems(args, found) -> list:
    """:func:`sparse_gradient_problem` for each input that requires grad and its gradient ``found``."""
    problems = [sparse_gradient_problem(i, x, g) for i, (x, g) in enumerate(zip(grad_inputs(args), found))]
    return [p for p in problems if p]


def through_dense(f):
    """``f`` called with each sparse argument made dense (differentiably: zeros where unspecified, and the gradient
    that flows back is sparse, on the argument's pattern): how a reference, which may be plain dense code, is
    called, so that its gradient is the dense gradient restricted to the pattern (masked semantics)."""
    def call(*args, **kwargs):
        return f(*[a.to_dense() if torch.is_tensor(a) and a.layout != torch.strided else a for a in args], **kwargs)
    return call


def called(fn, ref, args) -> list:
    """The property of a check that has none to replay: the target called on the case, its result printed."""
    print(fn(*args))
    return []


# -- calls and what they raise ------------------------------------------------------------------------------------

def ran(f, args, seed: int):
    """Every tensor ``f(*args)`` returns, detached, and the gradients of <its differentiable outputs, cotangents
    drawn from ``seed``> for the arguments that require grad (:func:`gradients`: [] when nothing is
    differentiable)."""
    outputs = outputs_of(f(*args))
    return [o.detach() for o in outputs], gradients(outputs, args, seed)


#: What a gradient check says of a target that returned nothing differentiable.


def differentiated(fn, args, inputs, seed: int, create_graph: bool = False):
    """The differentiable outputs of ``fn(*args)`` and the gradients of <them, cotangents drawn from ``seed``> with
    respect to ``inputs`` (zeros where unused); None when no output is differentiable."""
    outputs = differentiable(outputs_of(fn(*args)))
    if not outputs:
        return None
    grads = torch.autograd.grad(outputs, inputs, grad_outputs(outputs, seed), allow_unused=True,
                                create_graph=create_graph)
    return outputs, filled(grads, inputs)


def measured_noise(compute, args):
    """A callable giving :func:`spread` of ``compute`` at ``args``, measured once, when first called: a comparison
    that holds at the fixed tolerance never measures it."""
    found = []

    def measured():
        if not found:
            found.append(spread(compute, args))
        return found[0]

    return measured


# -- central differences: the Jacobians torch.func builds, judged ------------------------------------------------

#: Step and the tolerance a central difference supports, per dtype; lower precisions are not judged.
DIFFERENCE_STEPS = {torch.float64: (1e-6, Tol(1e-5, 1e-3)), torch.float32: (1e-3, Tol(1e-2, 1e-2))}
#: Columns (input elements) differenced at most: the first ones, in order; the rest are not compared.
DIFFERENCE_COLUMNS = 64


def central_jacobian(f, inputs) -> dict:
    """For each column (input j, flat element e), at most :data:`DIFFERENCE_COLUMNS`: d f_i / d x_j[e] for every
    output i, by central differences with the dtype's step (:data:`DIFFERENCE_STEPS`), divided by the step actually
    taken (2 eps rounds at 1e9: ulp 1.2e-7). ``f`` takes the inputs and returns a tuple of tensors; the inputs are
    not modified."""
    eps = DIFFERENCE_STEPS[inputs[0].dtype][0]
    base = [x.detach().clone() for x in inputs]
    found = {}
    with torch.no_grad():
        for j, e in [(j, e) for j, x in enumerate(base) for e in range(x.numel())][:DIFFERENCE_COLUMNS]:
            plus, minus = [x.clone() for x in base], [x.clone() for x in base]
            plus[j].view(-1)[e] += eps
            minus[j].view(-1)[e] -= eps
            width = plus[j].view(-1)[e] - minus[j].view(-1)[e]
            found[(j, e)] = [(p - m) / width for p, m in zip(f(*plus), f(*minus))]
    return found


def eager_jacobian(f, inputs) -> dict:
    """:func:`central_jacobian`'s columns, by eager autograd instead (one vjp per output element): the Jacobian the
    target's own backward gives, for a backward that is meant not to be its forward's derivative."""
    base = tuple(x.detach().clone().requires_grad_() for x in inputs)
    jac = torch.autograd.functional.jacobian(lambda *xs: tuple(f(*xs)), base)
    columns = [(j, e) for j, x in enumerate(base) for e in range(x.numel())][:DIFFERENCE_COLUMNS]
    with torch.no_grad():
        shapes = [o.shape for o in f(*base)]
    return {(j, e): [jacobian_column(jac, i, j, e, shape, base[j].numel()).detach() for i, shape in enumerate(shapes)]
            for j, e in columns}


def jacobian_column(jac, i: int, j: int, e: int, output_shape, input_numel: int):
    """Column (j, e) for output i of a torch.func Jacobian ``jac[i][j]`` (shape output + input)."""
    return jac[i][j].reshape(tuple(output_shape) + (input_numel,))[..., e]


def outputs_without_graph(fn, inputs) -> list:
    """The outputs of ``fn`` (a tensor or a tuple of them) on detached ``inputs``, without a graph."""
    with torch.no_grad():
        out = fn(*[x.detach() for x in inputs])
    return list(out) if isinstance(out, tuple) else [out]


def realified(fn, inputs):
    """``fn`` as a real function of real tensors, and ``inputs`` as such: each complex input is passed as its
    ``view_as_real`` (a trailing dim of 2: real, imaginary part) and each complex output returned so. Its
    autograd Jacobian is the true real one exactly when the backward follows PyTorch's convention, so the
    real-valued finite-difference machinery judges complex code unchanged. Real ``fn`` and inputs pass as they are."""
    flags = [x.is_complex() for x in inputs]
    if not any(flags) and not any(o.is_complex() for o in outputs_without_graph(fn, inputs)):
        return fn, list(inputs)

    def real_fn(*xs):
        found = fn(*[torch.view_as_complex(x) if c else x for x, c in zip(xs, flags)])
        outs = tuple(torch.view_as_real(o.resolve_conj()) if o.is_complex() else o
                     for o in (found if isinstance(found, tuple) else (found,)))
        return outs if len(outs) != 1 else outs[0]

    return real_fn, [torch.view_as_real(x.detach().resolve_conj()).clone() if c else x for x, c in zip(inputs, flags)]


def is_setup_context_refusal(exc) -> bool:
    """torch.func's refusal of an old-style (ctx in forward) autograd.Function."""
    return isinstance(exc, RuntimeError) and "must override the setup_context staticmethod" in str(exc)


# -- torch.compile: graphs counted, recompiles explained -------------------------------------------------------

#: Dynamo's default recompile limit (8) would silently fall back to eager mode; the audit wants to see.
RECOMPILE_LIMIT = 64
SCALAR_HINT = ("a tensor became a Python number while tracing (.item(), int(t), float(t), a data-dependent "
               "size): keep it a tensor, or make its size a declared dynamic size")


class Compiled:
    """``torch.compile(f)`` on ``backend`` wrapped to count the graphs it is handed, Dynamo's caches, counters and
    recompile limits reset first, so that its graphs, graph breaks and recompiles are its own. With ``fullgraph``
    a graph break raises; without it the break is counted and the rest runs eagerly. :meth:`note_shape` before
    each call lets :meth:`recompiles_every_shape` say whether every new shape compiled again."""

    def __init__(self, f, backend: str, fullgraph: bool = True):
        import torch._dynamo
        from torch._dynamo.utils import counters

        torch._dynamo.reset()
        counters.clear()
        for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                     "accumulated_cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, max(RECOMPILE_LIMIT, getattr(torch._dynamo.config, name)))
        inner = torch._dynamo.lookup_backend(backend)
        self.graphs = 0
        self.shapes: list = []
        self.graphs_before: list = []
        self.recompiles = recompile_reasons()

        def counting(gm, example_inputs):
            self.graphs += 1
            return inner(gm, example_inputs)

        self.fn = torch.compile(f, backend=counting, fullgraph=fullgraph)

    def note_shape(self, args) -> None:
        """Record that the next call takes the tensors of ``args``, of these shapes."""
        self.shapes.append(tuple(tuple(a.shape) for a in args if isinstance(a, torch.Tensor)))
        self.graphs_before.append(self.graphs)

    def graph_breaks(self) -> dict:
        """How many graph breaks Dynamo took since this was made, and the first reason."""
        from torch._dynamo.utils import counters

        reasons = counters["graph_break"]
        first = next(iter(reasons), "")
        return {"graph_breaks": sum(reasons.values()), **({"graph_break": dynamo_explained(Exception(first))}
                                                          if first else {})}

    def recompiles_every_shape(self) -> str | None:
        """Why the calls fail when every new shape compiled new graphs (three shapes or more)."""
        new_shapes, compiled_for = set(), 0
        for shape, before, after in zip(self.shapes, self.graphs_before, self.graphs_before[1:] + [self.graphs]):
            if shape not in new_shapes:
                new_shapes.add(shape)
                compiled_for += after > before
        if len(new_shapes) < 3 or compiled_for < len(new_shapes):
            return None
        reason = self.recompiles[-1] if self.recompiles else "Dynamo gave no reason"
        return (f"torch.compile recompiled for every new shape ({self.graphs} graphs for {len(new_shapes)} shapes "
                f"with automatic dynamic shapes on): a size is specialised, e.g. turned into a Python int "
                f"(int(x.shape[0]), a shape-dependent branch or slice); last recompile: {reason}")


def recompile_reasons() -> list:
    """A new list that each of Dynamo's recompiles appends its reason to from now on (the first guard that failed),
    out of the terminal's way; it stays empty on a torch without the recompiles log."""
    import logging

    found: list = []
    try:
        torch._logging.set_logs(recompiles=True)
    except Exception:  # an older torch without the artifact: recompiles are counted, not explained
        return found

    def emit(record):
        guards = [line.strip("- ").strip() for line in record.getMessage().splitlines() if line.strip().startswith("-")]
        found.append(guards[0] if guards else (record.getMessage().splitlines() or [""])[0])

    handler = logging.Handler()
    handler.emit = emit  # type: ignore[method-assign]  # a handler that only collects
    logger = logging.getLogger("torch._dynamo.guards.__recompiles")
    logger.propagate = False
    logger.handlers[:] = [handler]
    return found


def dynamo_refusal(exc) -> str:
    """What a Dynamo exception says, in one line: a graph break under fullgraph, or a failed compile (with a hint
    where a tensor became a Python number)."""
    import torch._dynamo

    if isinstance(exc, torch._dynamo.exc.Unsupported):
        return f"graph break under torch.compile(fullgraph=True): {dynamo_explained(exc)}"
    hint = f"; {SCALAR_HINT}" if "unbacked" in str(exc).lower() else ""
    return f"torch.compile failed: {type(exc).__name__}: {dynamo_explained(exc)}{hint}"


def dynamo_explained(exc) -> str:
    """A Dynamo message's first line, its explanation and the user's line it points at: from the explanation where
    it names one, else from the graph-break record (:func:`dynamo_user_site`)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return "(no message)"
    parts = [lines[0].rstrip(".")[:200]]
    parts += [line[:200] for line in lines[1:] if line.startswith(("Explanation:", "Developer debug context:"))
              and line.split(":", 1)[1].strip()][:1]
    where = next((line.lstrip("# ") for line in lines if line.startswith("# File")), "") or dynamo_user_site(exc)
    return "; ".join(parts) + (f" ({where})" if where else "")


def dynamo_user_site(exc) -> str:
    """The innermost frame outside torch where Dynamo stopped, written as Dynamo's explanation writes it (File
    "...", line N, in name, code: ...), from the exception's record of the user's stack (torch 2.11's message no
    longer names the line in its explanation); "" when it has none."""
    import os

    inside = os.path.dirname(torch.__file__) + os.sep
    frames = [getattr(exc, "innermost_user_frame_summary", None), *reversed(getattr(exc, "real_stack", None) or ())]
    frame = next((f for f in frames if f is not None and not f.filename.startswith(inside)), None)
    if frame is None:
        return ""
    code = (frame.line or "").strip()
    return f'File "{frame.filename}", line {frame.lineno}, in {frame.name}' + (f", code: {code}" if code else "")


# -- modules and models: built from a seed, trained a step -------------------------------------------------------

def seeded(factory, seed: int):
    """``factory()`` called with torch's generator seeded to ``seed``, the generator's state put back after."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return factory()


def built_module(make, seed: int, dtype, device):
    """The module ``make()`` builds from ``seed``, at ``dtype`` on ``device``."""
    return seeded(make, seed).to(dtype=dtype, device=torch.device(device))


def built_model(factory, dtype, device, seed: int = 0):
    """``(model, make_batch, loss)`` from a kind model's factory called from ``seed``, the model at ``dtype`` on
    ``device``; what is wrong (a str) when the factory returns something else. ``make_batch(size, seed)`` returns
    ``(inputs, targets)``, ``inputs`` a tuple of the model's arguments; ``loss(output, targets)`` a scalar."""
    built = seeded(factory, seed)
    if not (isinstance(built, tuple) and len(built) == 3 and isinstance(built[0], torch.nn.Module)):
        return ("the factory must return (model, make_batch, loss) with model an nn.Module; got "
                f"{type(built).__name__}")
    return built[0].to(dtype=dtype, device=torch.device(device)), built[1], built[2]


def model_batch(make_batch, size: int, seed: int, dtype, device):
    """``make_batch(size, seed)`` with its floating tensors at ``dtype`` and every tensor on ``device``."""
    inputs, targets = make_batch(size, seed)
    return tuple(_placed(x, dtype, device) for x in inputs), _placed(targets, dtype, device)


def _placed(value, dtype, device):
    if isinstance(value, torch.Tensor):
        value = value.to(device=device)
        return value.to(dtype) if value.is_floating_point() else value
    return value


def training_step(model, loss_fn, inputs, targets):
    """Forward and backward from zero gradients; the loss."""
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model(*inputs), targets)
    loss.backward()
    return loss


def parameter_grads(model) -> dict:
    """Every parameter's gradient by name (zeros where none arrived)."""
    return {n: (p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p))
            for n, p in model.named_parameters() if p.requires_grad}


def sgd(model, lr: float) -> None:
    """One plain SGD update of ``model``'s parameters."""
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p -= lr * p.grad


def nonfinite(loss, grads: dict) -> str | None:
    """What is not finite: the loss, or the first parameter gradient that is not."""
    if not torch.isfinite(loss).all():
        return f"the loss is {loss.item()}"
    for name, grad in grads.items():
        if not torch.isfinite(grad).all():
            return f"the gradient of {name!r} is not finite"
    return None


def nonfinite_origin(model, loss_fn, inputs, targets) -> str:
    """Where one step's first non-finite value comes from, the step re-run: a dispatch mode watches every forward
    operation; if forward is clean, anomaly mode names the backward that produced it."""
    import warnings

    finder = FirstNonFinite()
    with finder:
        model.zero_grad(set_to_none=True)
        loss = loss_fn(model(*inputs), targets)
    if finder.found:
        return finder.found
    with warnings.catch_warnings(record=True) as caught, torch.autograd.detect_anomaly(check_nan=True):
        warnings.simplefilter("always")
        try:
            loss.backward()
        except RuntimeError as exc:
            forward = next((str(w.message) for w in caught if "Traceback of forward call" in str(w.message)), "")
            where = _user_line(forward)
            return f"backward: {first_line(exc)}" + (f"; its forward was called at {where}" if where else "")
    return "not found again when re-run (the step is not deterministic)"


class FirstNonFinite(TorchDispatchMode):
    """Records the first operation whose output holds a NaN or an infinity, and the user code around it."""

    def __init__(self):
        super().__init__()
        self.found = ""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not self.found:
            tensors = [out] if isinstance(out, torch.Tensor) else [o for o in out if isinstance(o, torch.Tensor)] \
                if isinstance(out, (tuple, list)) else []
            if any(t.is_floating_point() and t.numel() and not torch.isfinite(t).all() for t in tensors):
                self.found = f"forward: {func} produced the first non-finite value{_where()}"
        return out


def _where() -> str:
    import inspect

    library = library_folders()
    frames = [f for f in inspect.stack()[2:] if not f.filename.startswith(library)]
    if not frames:
        return ""
    frame = frames[0]
    text = f" at {frame.filename}:{frame.lineno} in {frame.function}"
    function = _custom_function(frame.frame)
    return text + (f", inside autograd.Function {function}" if function else "")


def _custom_function(frame) -> str | None:
    """The custom autograd.Function whose forward ``frame`` is running, if it is one."""
    import inspect

    qualname = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)
    owner = qualname.rsplit(".", 1)[0] if "." in qualname else None
    cls = frame.f_globals.get(owner.split(".")[0]) if owner else None
    for part in owner.split(".")[1:] if owner and cls is not None else ():
        cls = getattr(cls, part, None)
    return owner if inspect.isclass(cls) and issubclass(cls, torch.autograd.Function) else None


def _user_line(text: str) -> str:
    library = library_folders()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("File ")]
    own = [ln for ln in lines if not ln.replace('File "', "").startswith(library)]
    return own[-1].replace('File "', "").replace('", line ', ":") if own else ""


# -- DistributedDataParallel: the target trained on a batch split across ranks -----------------------------------

#: What a rank's environment adds: gloo on the loopback interface, one thread.
RANK_ENV = {"GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1"}


class Harness(torch.nn.Module):
    """The target with parameters, as the distributed check trains it: an input without the batch axis (``axes``:
    argument -> the axis its batch is split along) becomes a parameter; one with it is data, multiplied by a
    learnable scale (1 along the batch), so that its gradient reaches a parameter too. The loss is
    ``sum(out ** 2) / 2`` over every floating output: a sum over samples, so a batch split across ranks adds up
    to the whole batch."""

    def __init__(self, fn, args: list, axes: dict):
        super().__init__()
        self.fn, self.axes, self.template = fn, axes, list(args)
        self.weights = torch.nn.ParameterDict()
        for i, arg in enumerate(args):
            if not (isinstance(arg, torch.Tensor) and arg.requires_grad):
                continue
            if i in axes:
                shape = list(arg.shape)
                shape[axes[i]] = 1
                self.weights[str(i)] = torch.nn.Parameter(torch.ones(shape, dtype=arg.dtype, device=arg.device))
            else:
                self.weights[str(i)] = torch.nn.Parameter(arg.detach().clone())

    def forward(self, *data):
        it = iter(data)
        args = []
        for i, template in enumerate(self.template):
            value = next(it) if i in self.axes else template
            if str(i) in self.weights:
                value = value * self.weights[str(i)] if i in self.axes else self.weights[str(i)]
            args.append(value)
        outputs = outputs_of(self.fn(*args))
        return sum((o ** 2).sum() / 2 for o in outputs if o.is_floating_point())


def harness_data(args: list, axes: dict, rank: int = 0, world: int = 1) -> list:
    """The batched inputs, detached, sliced to ``rank``'s share (the whole batch for world 1)."""
    found = []
    for i, axis in sorted(axes.items()):
        tensor = args[i].detach()
        found.append(tensor.chunk(world, dim=axis)[rank].contiguous() if world > 1 else tensor)
    return found


def harness_gradients(module: Harness) -> dict:
    """Each parameter's gradient, as nested float64 lists (zeros when it received none)."""
    return {name: (p.grad if p.grad is not None else torch.zeros_like(p)).detach().double().tolist()
            for name, p in module.weights.items()}


def whole_batch_gradients(fn, args: list, axes: dict) -> dict:
    """:func:`harness_gradients` of one process on the whole batch ({} when no input requires a gradient)."""
    module = Harness(fn, args, axes)
    if not list(module.parameters()):
        return {}
    module(*harness_data(args, axes)).backward()
    return harness_gradients(module)


def rank_gradients(fn, args: list, axes: dict, rank: int, world: int) -> dict:
    """This rank's :func:`harness_gradients` under DistributedDataParallel (its process group joined) on its share
    of the batch, times ``world`` (DDP averages; the check compares sums)."""
    module = torch.nn.parallel.DistributedDataParallel(Harness(fn, args, axes), find_unused_parameters=True)
    module(*harness_data(args, axes, rank, world)).backward()
    return {name: (torch.tensor(g, dtype=torch.float64) * world).tolist()
            for name, g in harness_gradients(module.module).items()}


def rank_error(exc) -> str:
    """What a rank raised, and where: "Type: first line (at file:line)"."""
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    first = first_line(exc) if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}{where}"


# -- intended gradients: a backward checked against the declared proxy's autograd gradient -----------------------

class ProxyError(Exception):
    """The entry's proxy is at fault, not the target: it raised, none of its outputs carries a gradient, or its
    gradient is undefined or off its own finite differences where drawn (the audit's cell is an error naming it)."""


def proxy_gradients(proxy, args, seed: int, dtype) -> list:
    """The proxy's gradients of <its differentiable outputs, :func:`cotangents_in` ``dtype``> for the arguments
    that require grad (zeros where unused), on new leaves with the values of ``args``: a :class:`ProxyError` where
    it raises, carries no gradient, or gives one that is NaN or inf."""
    try:
        found = rounded_vjps(proxy, fresh(args), seed, dtype)[1]
    except Exception as exc:
        raise ProxyError(f"the proxy raised {type(exc).__name__}: {first_line(exc)}{user_site(exc)}") from exc
    if not found:
        raise ProxyError("the proxy returned no output that carries a gradient (its autograd gradient is the "
                         "intended one: build it from differentiable torch ops)")
    for i, g in enumerate(found):
        bad = ~torch.isfinite(dense(g).detach())
        if bad.any():
            flat = int(bad.reshape(-1).int().argmax())
            raise ProxyError(f"the proxy's gradient of input {i} is {number(dense(g).reshape(-1)[flat].item())} at "
                             f"index {_index(bad.int(), g.shape)} ({value_range(args)}): undefined where drawn")
    return found


def proxy_differentiable(proxy, args) -> None:
    """A :class:`ProxyError` where the proxy's own autograd gradient disagrees with its finite differences at
    ``args`` (in float64): it has a kink there, or its backward is not its derivative, and says nothing."""
    leaves = leaves_in(args, torch.float64)
    inputs = grad_inputs(leaves)
    eps, tol = DIFFERENCE_STEPS[torch.float64]
    fast = sum(x.numel() for x in inputs) > 1024
    try:
        held = torch.autograd.gradcheck(wrapped(proxy, leaves), inputs, eps=eps, atol=tol.atol, rtol=tol.rtol,
                                        fast_mode=fast, raise_exception=False)
    except Exception as exc:
        raise ProxyError(f"the proxy raised {type(exc).__name__} under finite differences: {first_line(exc)}") from exc
    if not held:
        raise ProxyError(f"the proxy's own gradient disagrees with its finite differences ({value_range(args)}): it "
                         "is not a smooth primitive there (a straight-through expression such as step + (x - "
                         "x.detach()) is no proxy: write the function whose derivative is the intended gradient), "
                         "or it has a kink where drawn (keep the draws away with `kinks`, or narrow `domain`)")


def proxy_mismatches(fn, proxy, args, seed: int, tol, dtype, own_error: bool = False, ratios=None,
                     proxy_name: str = "") -> list:
    """The target's gradients (cotangents drawn from ``seed``, rounded to ``dtype``) against the proxy's in float64
    on the same values: within ``tol``, or, judged by the precision's own error (``own_error``), within
    OWN_ERROR_RATIO times the proxy's own error in ``dtype`` (:func:`own_error_mismatches`). Never against finite
    differences of the forward: the backward is meant not to be its derivative. The proxy is first held to its own
    finite differences there (:func:`proxy_differentiable`): a proxy that is not a smooth primitive says nothing."""
    proxy_differentiable(proxy, args)
    outputs, got = rounded_vjps(fn, args, seed, dtype)
    inputs = grad_inputs(args)
    truth = proxy_gradients(proxy, leaves_in(args, torch.float64), seed, dtype)
    name = str(dtype).replace("torch.", "")
    how = ""
    if own_error:
        try:
            own = proxy_gradients(proxy, args, seed, dtype)
        except ProxyError:  # the proxy has no kernel in this dtype: the truth's rounding stands in
            own = None
        found = own_error_mismatches("gradient of input", got, truth, own, dtype, ratios, value_range(args),
                                     largest_input(args))
        how = f", judged by the error the proxy itself makes in {name}"
    else:
        found = mismatches("gradient of input", got, truth, tol)
    named = f" {proxy_name}" if proxy_name else ""
    narrowed = next((f"; output {i} is {str(o.dtype).replace('torch.', '')} for {str(x.dtype).replace('torch.', '')} "
                     "inputs, so the gradient reaching the backward is rounded to it (what the dtype check reports)"
                     for i, o in enumerate(outputs) for x in inputs[:1]
                     if o.dtype.is_floating_point and o.dtype != x.dtype), "")
    return [Finding(f"{line} against the declared proxy{named} (its float64 autograd gradient, vjp with random "
                    f"cotangents{how}): the backward is not the intended gradient{narrowed}",
                    getattr(line, "kind", line)) for line in found]


@contextlib.contextmanager
def in_mode(fn, mode):
    """A module target ``fn`` in ``mode`` ("train" or "eval"; None: as it is) inside the block, restored after."""
    module = module_of(fn)
    was = module.training if module is not None else None
    if module is not None and mode is not None:
        module.train(mode == "train")
    try:
        yield
    finally:
        if module is not None:
            module.train(was)


def tangents(fn, args, seed: int, dtype) -> list:
    """Forward-mode AD of ``fn`` at ``args``: the tangent of each floating output (zeros where none) for tangents
    of the inputs that require grad drawn from ``seed`` (rounded to ``dtype``)."""
    import torch.autograd.forward_ad as fwAD

    generator = torch.Generator().manual_seed(seed + 1)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(a.detach(), torch.randn(a.shape, generator=generator, dtype=torch.float64)
                                .to(dtype).to(a.dtype).to(a.device))
                 if isinstance(a, torch.Tensor) and a.requires_grad else a for a in args]
        outs = [o for o in outputs_of(fn(*duals)) if floating(o)]
        found = [fwAD.unpack_dual(o).tangent for o in outs]
        return [torch.zeros_like(o.detach()) if t is None else t.detach().clone() for o, t in zip(outs, found)]


def second_order(fn, args, seed: int) -> list:
    """The gradients of <the gradients of <outputs, v>, w> with respect to the inputs and to v (v, w drawn from
    ``seed``): what the backward's own derivative gives, zeros where it does not depend on one."""
    leaves = fresh(args)
    outputs = differentiable(outputs_of(fn(*leaves)))
    inputs = grad_inputs(leaves)
    if not (outputs and inputs):
        return []
    vs = [v.requires_grad_() for v in grad_outputs(outputs, seed)]
    first = filled(torch.autograd.grad(outputs, inputs, vs, create_graph=True, allow_unused=True), inputs)
    live = [(g, w) for g, w in zip(first, grad_outputs(first, seed + 1)) if g.requires_grad]
    if not live:
        return [torch.zeros_like(x) for x in inputs + vs]
    found = torch.autograd.grad([g for g, _ in live], inputs + vs, [w for _, w in live], allow_unused=True)
    return [t.detach() for t in filled(found, inputs + vs)]


def bypass_hint(label: str, proxy_name: str, transform: str) -> str:
    """Said of a gradient that differs from the eager one under ``transform`` when the entry declares a proxy: the
    transform may have bypassed the custom backward (a compiled step's own derivative is zero)."""
    if not proxy_name or "gradient" not in label:
        return ""
    return (f"; the entry's backward is intended (proxy {proxy_name}): under {transform} the custom backward did "
            "not run, or ran otherwise (a traced forward's own derivative is not the intended gradient)")


# -- a backward that only .backward() runs --------------------------------------------------------------------------

class _ThroughBackward(torch.autograd.Function):
    """The target on new leaves inside its forward; its backward runs the target's with torch.autograd.backward (no
    ``inputs``: what reentrant checkpointing and reversible layers accept), in a thread of its own, and returns the
    leaves' ``.grad``. The first backward goes through the graph forward built, as training's does (what the target
    saved, and anything done to it since, counts); each further one (gradcheck takes one per row) runs the target
    again on new leaves, from the random state forward started with, for the libraries that allow one backward per
    forward (memcnn's ``num_bwd_passes=1``)."""

    @staticmethod
    def forward(ctx, call, *tensors):
        ctx.call, ctx.needs = call, ctx.needs_input_grad[1:]
        ctx.rng = torch.get_rng_state()
        ctx.save_for_backward(*tensors)
        with torch.enable_grad():
            ctx.leaves = [t.detach().requires_grad_(need) for t, need in zip(tensors, ctx.needs)]
            result = call(ctx.leaves)
        ctx.outputs = [o for o in outputs_of(result) if isinstance(o, torch.Tensor)]
        ctx.mark_non_differentiable(*[o for o in ctx.outputs if not floating(o)])
        kept = tuple(o.detach() for o in ctx.outputs)
        return kept[0] if isinstance(result, torch.Tensor) else kept

    @staticmethod
    def backward(ctx, *cotangents):
        first = ctx.outputs is not None
        leaves = ctx.leaves if first else [t.detach().requires_grad_(need)
                                           for t, need in zip(ctx.saved_tensors, ctx.needs)]
        outputs, ctx.outputs = ctx.outputs, None
        raised = []

        def run():
            try:
                found = outputs
                if found is None:
                    with torch.random.fork_rng(devices=[]):
                        torch.set_rng_state(ctx.rng)
                        found = [o for o in outputs_of(ctx.call(leaves)) if isinstance(o, torch.Tensor)]
                live = [(o, c) for o, c in zip(found, cotangents) if o.requires_grad and c is not None]
                if live:
                    torch.autograd.backward([o for o, _ in live], [c for _, c in live])
            except Exception as exc:
                raised.append(exc)

        # A backward of its own, in a thread of its own: nested inside torch.autograd.grad's (on this thread), it
        # would count as one that .grad() started, and the target would refuse it again.
        worker = threading.Thread(target=run)
        worker.start()
        worker.join()
        if raised:
            raise raised[0]
        return (None, *[leaf.grad if leaf.requires_grad else None for leaf in leaves])


def backward_only(f):
    """``f`` with every gradient of it taken through torch.autograd.backward, reading ``.grad`` of new leaves
    (:class:`_ThroughBackward`), so that torch.autograd.grad, gradcheck and the audit's properties can differentiate
    a target that refuses ``.grad()``; a call with nothing to differentiate calls ``f`` as it is. A module's
    parameters, reached by ``f`` itself, get their ``.grad`` as in training."""
    def call(*args):
        positions = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor)]
        if not (torch.is_grad_enabled() and any(args[i].requires_grad for i in positions)):
            return f(*args)

        def on(leaves):
            full = list(args)
            for i, leaf in zip(positions, leaves):
                full[i] = leaf
            return f(*full)

        return _ThroughBackward.apply(on, *[args[i] for i in positions])

    call.module = f if isinstance(f, torch.nn.Module) else getattr(f, "module", None)
    for name in ("fresh", "factory", "SEED"):  # a module target stays reachable as the audit reaches it
        if hasattr(f, name):
            setattr(call, name, getattr(f, name))
    return call


# -- the verdict ---------------------------------------------------------------------------------------------------

def report(problems) -> int:
    """Print each problem, then "FAILS" or "holds"; the exit code a replay script ends with (1: it fails)."""
    for problem in problems:
        print(problem)
    print("FAILS" if problems else "holds")
    sys.stdout.flush()
    return 1 if problems else 0

"""``gradcheck``: the analytic gradient equals finite differences and, given a reference, its gradient."""

from __future__ import annotations

import torch
from torch.autograd.gradcheck import GradcheckError

from audit.checks import reference, smoothness
from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.inputs.sparse import sparse_gradient_problem
from audit.toolkit.jacobian import explain_gradcheck_failure, gradcheck_options, gradcheck_values, wrap
from audit.toolkit.tensors import compare_all, dense, floating, grad_inputs, outputs_of, vjp, wide


def run(subject, case) -> None:
    """torch's gradcheck (slow mode on small inputs), then the gradient against the reference's."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    if not inputs:
        raise Violation("no input requires a gradient: mark one tensor input requires_grad: true")
    fn = wrap(subject, args)
    options = gradcheck_options(subject, inputs)
    if options.get("masked"):
        _sparse_layouts(subject, case)
    try:
        torch.autograd.gradcheck(fn, inputs, **options)
    except GradcheckError as exc:
        if smoothness.excused(subject, "gradcheck", case, fn, inputs, options["eps"]):
            return
        raise Violation(explain_gradcheck_failure(fn, inputs, exc, options)) from None
    if subject.entry.kind == "module":
        _parameters(subject, args)
    if subject.target.reference is not None and subject.reference_draws_alike(case):
        _against_reference(subject, case, fn, inputs, options["eps"])


def _parameters(subject, args) -> None:
    """A module's gradients with respect to its parameters, against finite differences too."""
    module = subject.target.fn.module(getattr(torch, subject.dtype), subject.device)
    names = [name for name, p in module.named_parameters() if p.requires_grad]
    if not names:
        return
    values = [module.get_parameter(n).detach().clone().requires_grad_() for n in names]
    fixed = [a.detach() if isinstance(a, torch.Tensor) else a for a in args]

    def fn(*params):
        with subject.stream():
            found = outputs_of(torch.func.functional_call(module, dict(zip(names, params)), tuple(fixed)))
        kept = [o for o in found if floating(o)]
        return tuple(kept) if len(kept) != 1 else kept[0]

    options = gradcheck_options(subject, values)
    try:
        torch.autograd.gradcheck(fn, values, **options)
    except GradcheckError as exc:
        message = explain_gradcheck_failure(fn, values, exc, options)
        for i, name in enumerate(names):
            message = message.replace(f"with respect to input {i}:", f"with respect to parameter {name!r}:")
        raise Violation(f"parameters: {message}") from None


def _sparse_layouts(subject, case) -> None:
    """Each sparse input's gradient has its layout and no value outside its pattern (masked gradcheck alone
    would accept a dense gradient in fast mode, and autograd accepts it anywhere)."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    _, grads = vjp(subject.evaluate, args, inputs, subject.seed)
    for i, (x, g) in enumerate(zip(inputs, grads)):
        problem = sparse_gradient_problem(i, x, g)
        if problem:
            raise Violation(problem)


def _against_reference(subject, case, fn, inputs, eps: float) -> None:
    seed = subject.seed
    args = subject.args(case)
    ref_args = subject.args(case)
    _, grads = vjp(subject.evaluate, args, grad_inputs(args), seed)
    with reference.blamed():
        _, expected = vjp(subject.evaluate_reference, ref_args, grad_inputs(ref_args), seed)
    # where the reference's gradient is undefined, gradcheck (which held) has judged the target's
    expected = reference.gradients_defined(subject, case, "gradcheck (against the reference)", fn, inputs, grads,
                                           expected, judged=True)
    tolerance = subject.tolerance(tight=True)
    try:
        compare_all("gradient of input", grads, expected, tolerance)
    except Violation as exc:
        if reference.unreliable(subject, case, "gradcheck (against the reference)", subject.args(case)):
            return
        columns = [(i, c) for i, (g, e) in enumerate(zip(grads, expected)) for c in _differing(g, e, tolerance)]
        if smoothness.excused(subject, "gradcheck (against the reference)", case, fn, inputs, eps, columns):
            return
        raise Violation(f"{exc} against the reference's autograd gradient (vjp with random "
                        "cotangents); a backward computed in lower precision than its input "
                        "passes finite differences but not this") from None


def _differing(got: torch.Tensor, expected: torch.Tensor, tol) -> list[int]:
    """Flat indices where ``got`` is not close to ``expected``."""
    got, expected = dense(got), dense(expected)  # a sparse gradient: its values, zeros where unspecified
    close = torch.isclose(wide(got.detach()).cpu(), wide(expected.detach()).cpu(), rtol=tol.rtol,
                          atol=tol.atol, equal_nan=True)
    return torch.nonzero(~close.reshape(-1)).reshape(-1).tolist()


CHECK = declared(
    "gradcheck",
    run=run,
    script="""\
from torch.autograd.gradcheck import GradcheckError
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
def f(*xs):
    it = iter(xs)
    out = fn(*[next(it) if torch.is_tensor(a) and a.requires_grad else a for a in args])
    outs = [o.to_dense() if o.layout != torch.strided else o for o in tensors_of(out)]  # gradcheck: dense outputs
    outs = [o for o in outs if o.is_floating_point()]
    return tuple(outs) if len(outs) != 1 else outs[0]
failed = False
if options.get("masked"):  # a sparse input: its gradient has its layout and no value outside its pattern
    _, found = grads(fn, args)
    for i, (x, g) in enumerate(zip(diff, found)):
        problem = sparse_gradient_problem(i, x, g)
        if problem:
            print(problem)
            failed = True
try:  # the audit's options: eps, tolerances and fast mode (masked for a sparse input) for this dtype and size
    if not failed:
        torch.autograd.gradcheck(f, diff, **options)
except GradcheckError as exc:
    print("gradcheck:", exc)
    failed = True
if isinstance(fn, torch.nn.Module):  # and with respect to the module's parameters
    names = [n for n, p in fn.named_parameters() if p.requires_grad]
    fixed = tuple(a.detach() if torch.is_tensor(a) else a for a in args)
    def by_parameters(*ps):
        found = torch.func.functional_call(fn, dict(zip(names, ps)), fixed)
        found = [o for o in (found if isinstance(found, (tuple, list)) else (found,)) if floating(o)]
        return tuple(found) if len(found) != 1 else found[0]
    params = [fn.get_parameter(n).detach().clone().requires_grad_() for n in names]
    try:
        torch.autograd.gradcheck(by_parameters, params, **options)
    except GradcheckError as exc:
        print("gradcheck of the parameters", names, ":", exc)
        failed = True
if ref is not None and not failed:  # the gradient against the reference's, with the cell's cotangents
    _, got = grads(fn, args)
    _, expected = grads(ref, [a.detach().clone().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a
                              for a in args])
    expected = defined_only(got, expected)  # the reference undefined: gradcheck (which held) judged the target
    failed = differs("gradient of input", got, expected)
print("FAILS" if failed else "holds")
sys.exit(1 if failed else 0)
""",
    script_values=gradcheck_values,
)

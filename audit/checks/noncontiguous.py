"""``noncontiguous``: non-contiguous inputs and grad_outputs give the contiguous results."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.errors import first_line
from audit.runtime.subject import laid_out
from audit.toolkit import noise
from audit.toolkit.tensors import compare_all, differentiable, filled, grad_inputs, grad_outputs, outputs_of, vjp


def run(subject, case) -> None:
    """Drawn layouts for every input; then transposed, strided and expanded grad_outputs."""
    dense = subject.contiguous_args(case)
    expected, expected_grads = vjp(subject.evaluate, dense, grad_inputs(dense), subject.seed)
    args = subject.args(case)
    layouts = ", ".join(f"input {i} {case.layout(i)}" for i, a in enumerate(args) if isinstance(a, torch.Tensor))
    outputs, grads = vjp(subject.evaluate, args, grad_inputs(args), subject.seed)
    measured = noise.noise(lambda xs: list(vjp(subject.evaluate, xs, grad_inputs(xs), subject.seed)), dense)
    try:
        noise.compare_within_noise("output", outputs, expected, subject.tolerance(), lambda: measured()[0])
        noise.compare_within_noise("gradient of input", grads, expected_grads, subject.tolerance(),
                                   lambda: measured()[1])
    except Violation as exc:
        raise Violation(f"{exc} with non-contiguous inputs ({layouts}) vs contiguous ones") from None
    for layout in ("transposed", "strided", "expanded"):
        _grad_output_layout(subject, case, layout)


def _grad_output_layout(subject, case, layout: str) -> None:
    args = subject.contiguous_args(case)
    inputs = grad_inputs(args)
    outputs = differentiable(outputs_of(subject.evaluate(*args)))
    dense = grad_outputs(outputs, subject.seed)
    if layout == "expanded":  # stride 0: one value broadcast, as after a sum or a mean
        dense = [g.reshape(-1)[:1].expand(g.shape) if g.numel() and g.dim() else g for g in dense]  # 0-d: no strides
        given = dense
        dense = [g.contiguous() for g in dense]
    else:
        given = [_copy(g, layout) for g in dense]
    expected = torch.autograd.grad(outputs, inputs, dense, retain_graph=True, allow_unused=True)
    try:
        got = torch.autograd.grad(outputs, inputs, given, allow_unused=True)
    except RuntimeError as exc:
        raise Violation(f"backward raised with {layout} grad_outputs: {first_line(exc)}") from None
    try:
        compare_all("gradient of input", filled(got, inputs), filled(expected, inputs), subject.tolerance())
    except Violation as exc:
        raise Violation(f"{exc} with {layout} grad_outputs vs contiguous ones (a backward that assumes a "
                        "dense gradient layout)") from None


def _copy(g: torch.Tensor, layout: str) -> torch.Tensor:
    out = laid_out(g.shape, g.dtype, g.device, layout if g.dim() >= (2 if layout == "transposed" else 1) else "offset")
    return out.copy_(g)


CHECK = declared(
    "noncontiguous",
    run=run,
    script="""\
dense = [a.detach().clone(memory_format=torch.contiguous_format).requires_grad_(a.requires_grad)
         if torch.is_tensor(a) else a for a in args]  # fresh row-major storage, no offset
outs, gs = grads(fn, args)
dense_outs, dense_gs = grads(fn, dense)
# within the contiguous run's own rounding noise, measured as the audit does (FACTOR times its spread on atol)
noise = spread(lambda xs: list(grads(fn, xs)), dense)
failed = differs("output (non-contiguous inputs)", outs, dense_outs, atol + FACTOR * noise[0])
failed |= differs("gradient (non-contiguous inputs)", gs, dense_gs, atol + FACTOR * noise[1])
for layout in ("transposed", "strided"):
    failed |= differs(f"gradient ({layout} grad_outputs)", grads(fn, dense, layout)[1], dense_gs)
failed |= differs("gradient (expanded grad_outputs)", grads(fn, dense, "expanded")[1],
                  grads(fn, dense, "expanded values")[1])
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,  # the script compares at the check's tolerance
)

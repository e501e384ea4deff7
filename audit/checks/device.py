"""``device``: on each claimed device, outputs and gradients stay there and match the CPU."""

from __future__ import annotations

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit.tensors import compare_all, grad_inputs, vjp


def run(subject, case) -> None:
    """Outputs and gradients on the input's device, equal to the CPU's within the dtype's tolerance."""
    args = subject.args(case)
    outputs, grads = vjp(subject.evaluate, args, grad_inputs(args), subject.seed)
    for label, tensors in (("output", outputs), ("gradient of input", grads)):
        for i, t in enumerate(tensors):
            if t.device.type != subject.device:
                raise Violation(f"{label} {i} is on {t.device} for inputs on {subject.device}")
    if subject.device == "cpu":
        return
    cpu_args = subject.args(case, device="cpu")
    expected, expected_grads = vjp(subject.evaluate, cpu_args, grad_inputs(cpu_args), subject.seed)
    tolerance = subject.tolerance()
    compare_all(f"output ({subject.device} vs cpu)", outputs, expected, tolerance)
    compare_all(f"gradient ({subject.device} vs cpu) of input", grads, expected_grads, tolerance)


CHECK = declared(
    "device",
    run=run,
    script="""\
def run(xs):
    \"\"\"Differentiable outputs and the gradients of <them, the cell's cotangents> for the inputs that require grad.\"\"\"
    outs = live(tensors_of(audited(*xs)))
    if not outs:
        print("returned no differentiable output: nothing carries a gradient back")
        sys.exit(1)
    return [o.detach() for o in outs], vjp(outs, xs)


outs, gs = run(args)
failed = False
for label, tensors in (("output", outs), ("gradient of input", gs)):
    for i, t in enumerate(tensors):
        if t.device.type != torch.device(device).type:
            print(f"{label} {i} is on {t.device} for inputs on {device}")
            failed = True
if not failed and torch.device(device).type != "cpu":
    on_cpu = [a.detach().cpu().requires_grad_(a.requires_grad) if torch.is_tensor(a) else a for a in args]
    cpu_outs, cpu_gs = run(on_cpu)
    failed = differs(f"output ({device} vs cpu)", [o.cpu() for o in outs], cpu_outs)
    failed = failed or differs(f"gradient ({device} vs cpu) of input", [g.cpu() for g in gs], cpu_gs)
print("differs from the CPU or leaves the device" if failed else f"outputs and gradients on {device}, as on the CPU")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)

"""``device``: on each claimed device, outputs and gradients stay there and match the CPU."""

from __future__ import annotations

from audit.checks.catalog import declared
from audit.checks.interface import Violation
from audit.checks.subject import grad_inputs
from audit.checks.tensors import compare_all, vjp


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
out = fn(*args)
print(out)
""",
)

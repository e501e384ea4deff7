"""``undefined_grad``: backward through each output alone works, the others' gradients undefined."""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit.tensors import compare_all, differentiable, filled, grad_inputs, grad_outputs, outputs_of


def run(subject, case) -> None:
    """For each output k: grad of output k alone equals the full grad with zeros for the others."""
    args = subject.args(case)
    inputs = grad_inputs(args)
    outputs = differentiable(outputs_of(subject.call(args)))
    if not inputs or not outputs:
        return
    cotangents = grad_outputs(outputs, subject.seed)
    for k, out in enumerate(outputs):
        alone = _grads(lambda: torch.autograd.grad(out, inputs, cotangents[k], retain_graph=True,
                                                   allow_unused=True), k, len(outputs))
        masked = [c if j == k else torch.zeros_like(c) for j, c in enumerate(cotangents)]
        full = torch.autograd.grad(outputs, inputs, masked, retain_graph=True, allow_unused=True)
        compare_all(f"backward through output {k} alone: gradient of input",
                    filled(alone, inputs), filled(full, inputs), subject.tolerance())


def _grads(call, k: int, count: int):
    try:
        return call()
    except (TypeError, RuntimeError, AttributeError) as exc:
        raise Violation(f"backward through output {k} alone (the other {count - 1} output gradient(s) "
                        f"undefined, i.e. None in backward) raised {type(exc).__name__}: {exc}; "
                        "handle None grad_outputs, or call ctx.set_materialize_grads(True)") from None


CHECK = declared(
    "undefined_grad",
    run=run,
    script="""\
# The audit's property: for each output k, backward through output k alone (the others' gradients undefined,
# None in backward) runs and equals backward through all outputs with zeros as the others' cotangents.
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
outs = live(tensors_of(audited(*args)))
cots = cotangents(outs)
failed = False
for k, o in enumerate(outs if diff else []):
    try:
        alone = torch.autograd.grad(o, diff, cots[k], retain_graph=True, allow_unused=True)
    except (TypeError, RuntimeError, AttributeError) as exc:
        print(f"backward through output {k} alone raised {type(exc).__name__}: {exc}")
        sys.exit(1)
    masked = [c if j == k else torch.zeros_like(c) for j, c in enumerate(cots)]
    full = torch.autograd.grad(outs, diff, masked, retain_graph=True, allow_unused=True)
    failed |= differs(f"backward through output {k} alone: gradient of input", filled(alone, diff), filled(full, diff))
print("fails" if failed else "holds: backward through each output alone equals backward with zeros for the others")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)

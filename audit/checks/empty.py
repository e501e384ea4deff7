"""``empty``: where a dim may be 0, forward and backward work on empty tensors."""

from __future__ import annotations

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.toolkit.tensors import differentiable, grad_inputs, grad_outputs, outputs_of


def run(subject, case) -> None:
    """Forward, then backward with random cotangents; gradient shapes match the inputs."""
    import torch

    args = subject.args(case)
    outputs = differentiable(outputs_of(subject.call(args)))
    inputs = grad_inputs(args)
    if not outputs or not inputs:
        return
    grads = torch.autograd.grad(outputs, inputs, grad_outputs(outputs, subject.seed), allow_unused=True)
    for i, (g, x) in enumerate(zip(grads, inputs)):
        if g is not None and g.shape != x.shape:
            raise Violation(f"gradient of input {i} has shape {list(g.shape)}, expected {list(x.shape)}")


CHECK = declared(
    "empty",
    run=run,
    script="""\
# The audit's property: forward, then backward with the cell's cotangents, on empty tensors; each gradient has
# its input's shape. A target that raises (here or in backward) fails it too: the traceback, exit code 1.
diff = [a for a in args if torch.is_tensor(a) and a.requires_grad]
failed = False
for i, (g, x) in enumerate(zip(vjp(tensors_of(audited(*args)), args), diff)):
    if g.shape != x.shape:
        print(f"gradient of input {i} has shape {list(g.shape)}, expected {list(x.shape)}")
        failed = True
print("fails" if failed else "holds: forward and backward run on the empty case, each gradient of its input's shape")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)

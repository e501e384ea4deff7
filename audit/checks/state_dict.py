"""``state_dict`` (kind ``module``): save the module's state_dict, load it into a fresh instance built
from another seed, and get the same outputs and gradients (inputs and parameters)."""

from __future__ import annotations

import io

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation, tolerance_values
from audit.errors import first_line
from audit.toolkit.tensors import compare_all, gradients, outputs_of

LOST = ("a tensor the forward uses is not saved: make it a parameter or a registered buffer "
        "(self.register_buffer), or restore it in load_state_dict")


def run(subject, case) -> None:
    """The cell's module against a fresh instance that loaded its state_dict through torch.save."""
    maker = subject.target.fn
    dtype = getattr(torch, subject.dtype)
    original = maker.module(dtype, subject.device)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    fresh = maker.fresh(maker.SEED + 1).to(dtype=dtype, device=torch.device(subject.device))
    try:
        fresh.load_state_dict(torch.load(buffer, weights_only=True))
    except Exception as exc:
        raise Violation(f"load_state_dict into a fresh instance raised {type(exc).__name__}: "
                        f"{first_line(exc)}") from None
    before, after = _run(original, subject, case), _run(fresh, subject, case)
    tol = subject.tolerance()
    try:
        compare_all("after a state_dict round trip, output", after[0], before[0], tol)
        compare_all("after a state_dict round trip, gradient of input", after[1], before[1], tol)
        compare_all("after a state_dict round trip, gradient of parameter", after[2], before[2], tol)
    except Violation as exc:
        raise Violation(f"{exc}; {LOST}") from None


def _run(module, subject, case):
    args = subject.args(case)
    params = [p for p in module.parameters() if p.requires_grad]
    outputs = outputs_of(subject.guard(module)(*args))
    grads = gradients(outputs, list(args) + params, subject.seed)
    inputs = sum(isinstance(a, torch.Tensor) and a.requires_grad for a in args)
    return [o.detach() for o in outputs], grads[:inputs], grads[inputs:]


CHECK = declared(
    "state_dict",
    run=run,
    script="""\
import io


def run(m):
    \"\"\"Outputs of the module m on fresh copies of args, and the gradients of <differentiable outputs, the cell's
    cotangents> for the inputs that require grad and for m's parameters.\"\"\"
    xs = fresh(args)
    outs = tensors_of(guarded(m)(*xs))
    inputs = sum(torch.is_tensor(x) and x.requires_grad for x in xs)
    found = vjp(outs, xs + [p for p in m.parameters() if p.requires_grad])
    return [o.detach() for o in outs], found[:inputs], found[inputs:]


buffer = io.BytesIO()
torch.save(module.state_dict(), buffer)
buffer.seek(0)
torch.manual_seed(1)  # a fresh instance from another seed than the original's 0
loaded = make().to(dtype=dtype, device=device)
try:
    loaded.load_state_dict(torch.load(buffer, weights_only=True))
except Exception as exc:
    print(f"load_state_dict into a fresh instance raised {type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}")
    sys.exit(1)
before, after = run(module), run(loaded)
failed = differs("after a state_dict round trip, output", after[0], before[0])
failed = failed or differs("after a state_dict round trip, gradient of input", after[1], before[1])
failed = failed or differs("after a state_dict round trip, gradient of parameter", after[2], before[2])
print("a tensor the forward uses is not saved: make it a parameter or a registered buffer" if failed
      else "the state_dict round trip keeps outputs and gradients")
sys.exit(1 if failed else 0)
""",
    script_values=tolerance_values,
)

"""``undefined_grad``: backward through each output alone works, the others' gradients undefined."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import differentiable, grad_inputs, grad_outputs, vjp
from audit.kit.compare import mismatches
from audit.kit.explain import user_site
from audit.kit.tensors import outputs_of


def undefined_grad(fn, ref, args, *, seed, tol) -> list:
    """For each output k: backward through output k alone (the others' gradients undefined, None in backward) runs
    and equals, within ``tol``, backward through every output with zeros as the others' cotangents (drawn from
    ``seed``). A backward that raises whatever its gradients (with every one defined too) raises as it is: the
    target's exception, not this property's."""
    inputs = grad_inputs(args)
    outputs = differentiable(outputs_of(fn(*args)))
    if not inputs or not outputs:
        return []
    cotangents = grad_outputs(outputs, seed)
    for k, out in enumerate(outputs):
        masked = [c if j == k else torch.zeros_like(c) for j, c in enumerate(cotangents)]
        try:
            alone = vjp(out, inputs, cotangents[k], retain_graph=True)
        except (TypeError, RuntimeError, AttributeError) as exc:
            if len(outputs) == 1:
                raise  # nothing else is undefined: the backward itself raises
            try:
                vjp(outputs, inputs, masked, retain_graph=True)
            except (TypeError, RuntimeError, AttributeError):
                raise exc from None  # it raises with every gradient defined too: not about the undefined ones
            return [f"backward through output {k} alone (the other {len(outputs) - 1} output gradient(s) "
                    f"undefined, i.e. None in backward) raised {type(exc).__name__}: {exc}{user_site(exc)}; "
                    "handle None grad_outputs, or call ctx.set_materialize_grads(True)"]
        full = vjp(outputs, inputs, masked, retain_graph=True)
        found = mismatches(f"backward through output {k} alone: gradient of input", alone, full, tol)
        if found:
            return found
    return []


CHECK = declared("undefined_grad", replay=undefined_grad, script_values=tolerance_values)

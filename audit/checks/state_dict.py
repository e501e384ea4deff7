"""``state_dict`` (kind ``module``): save the module's state_dict, load it into a fresh instance built
from another seed, and get the same outputs and gradients (inputs and parameters)."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import grad_inputs, gradients
from audit.kit.calls import guarded
from audit.kit.compare import mismatches
from audit.kit.explain import first_line
from audit.kit.models import built_module
from audit.kit.tensors import fresh, outputs_of


def state_dict(fn, ref, args, *, make, module_seed, mutates, seed, tol, dtype, device) -> list:
    """The module ``make()`` builds from ``module_seed`` (as the audit builds it), its state_dict through torch.save
    loaded into a fresh instance built from ``module_seed + 1``: outputs and gradients (inputs and parameters) on
    ``args`` unchanged within ``tol``."""
    import io

    original = built_module(make, module_seed, dtype, device)
    buffer = io.BytesIO()
    torch.save(original.state_dict(), buffer)
    buffer.seek(0)
    loaded = built_module(make, module_seed + 1, dtype, device)
    try:
        loaded.load_state_dict(torch.load(buffer, weights_only=True))
    except Exception as exc:
        return [f"load_state_dict into a fresh instance raised {type(exc).__name__}: {first_line(exc)}"]
    before, after = module_run(original, args, mutates, seed), module_run(loaded, args, mutates, seed)
    found = (mismatches("after a state_dict round trip, output", after[0], before[0], tol)
             or mismatches("after a state_dict round trip, gradient of input", after[1], before[1], tol)
             or mismatches("after a state_dict round trip, gradient of parameter", after[2], before[2], tol))
    return [f"{found[0]}; a tensor the forward uses is not saved: make it a parameter or a registered buffer "
            "(self.register_buffer), or restore it in load_state_dict"] if found else []


def module_run(module, args, mutates, seed: int):
    """Outputs of ``module`` on fresh copies of ``args``, and the gradients of <differentiable outputs, cotangents
    drawn from ``seed``> for the inputs that require grad, then for its parameters."""
    xs = fresh(args)
    params = [p for p in module.parameters() if p.requires_grad]
    outputs = outputs_of(guarded(module, mutates, seed)(*xs))
    grads = gradients(outputs, list(xs) + params, seed)
    inputs = len(grad_inputs(xs))
    return [o.detach() for o in outputs], grads[:inputs], grads[inputs:]


CHECK = declared(
    "state_dict",
    replay=state_dict,
    replay_helpers=(module_run,),
    script_values=lambda subject, case: {**tolerance_values(subject, case), "module_seed": subject.target.fn.SEED},
)

"""``device``: on each claimed device, outputs and gradients stay there and match the CPU."""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.catalog.interface import tolerance_values
from audit.kit.autograd import NO_GRADIENT_OUTPUT, call_vjp
from audit.kit.compare import mismatches


def on_device(fn, ref, args, *, seed, tol, device) -> list:
    """Outputs and gradients on the inputs' ``device``, equal to the CPU's within ``tol`` (named ``on_device``: a
    replay script's ``device`` is the cell's device)."""
    outputs, grads = call_vjp(fn, args, seed)
    if not outputs:
        return [NO_GRADIENT_OUTPUT]
    for label, tensors in (("output", outputs), ("gradient of input", grads)):
        for i, t in enumerate(tensors):
            if t.device.type != torch.device(device).type:
                return [f"{label} {i} is on {t.device} for inputs on {device}"]
    if torch.device(device).type == "cpu":
        return []
    on_cpu = [a.detach().cpu().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    expected, expected_grads = call_vjp(fn, on_cpu, seed)
    return (mismatches(f"output ({device} vs cpu)", outputs, expected, tol)
            or mismatches(f"gradient ({device} vs cpu) of input", grads, expected_grads, tol))


CHECK = declared(
    "device",
    replay=on_device,
    script_values=tolerance_values,
)

"""The thing a check examines: one target at one dtype and device, with fresh arguments per call."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from audit.engine.target import Target
from audit.inputs.case import Case, TensorArg
from audit.registry.model import Entry, Tolerance

#: torch.testing's defaults, the starting point for comparisons in each dtype.
DEFAULT_TOLERANCE = {
    "float64": Tolerance(atol=1e-7, rtol=1e-7),
    "float32": Tolerance(atol=1e-5, rtol=1.3e-6),
    "float16": Tolerance(atol=1e-5, rtol=1e-3),
    "bfloat16": Tolerance(atol=1e-5, rtol=1.6e-2),
}
#: For float64 results compared with a float64 reference: tight enough that float32 arithmetic
#: hidden under a float64 input (relative error about 1e-8) is caught.
TIGHT_FLOAT64 = Tolerance(atol=1e-10, rtol=1e-9)


@dataclass(frozen=True)
class Subject:
    """An entry's target at a dtype and device; builds arguments and calls the target."""

    entry: Entry
    target: Target
    dtype: str
    device: str
    seed: int = 0

    def args(self, case: Case, dtype: str | None = None, device: str | None = None) -> list:
        """Fresh arguments for ``case``: leaf tensors, ``requires_grad`` as the registry says."""
        dtype, device = dtype or self.dtype, device or self.device
        return [_tensor(a, dtype, device) if isinstance(a, TensorArg) else a.value for a in case.args]

    def call(self, args: list):
        """The target on ``args``."""
        return self.target.fn(*args)

    def tolerance(self, dtype: str | None = None, *, tight: bool = False) -> Tolerance:
        """The entry's tolerance for ``dtype``, else torch.testing's (tight float64 on request)."""
        dtype = dtype or self.dtype
        own = self.entry.tolerance_for(dtype)
        if own:
            return own
        return TIGHT_FLOAT64 if tight and dtype == "float64" else DEFAULT_TOLERANCE[dtype]


def _tensor(arg: TensorArg, dtype: str, device: str) -> torch.Tensor:
    # torch.empty gives the standard contiguous strides even for empty shapes (numpy may not).
    tensor = torch.empty(arg.values.shape, dtype=getattr(torch, arg.dtype or dtype), device=device)
    tensor.copy_(torch.from_numpy(np.ascontiguousarray(arg.values)))
    return tensor.requires_grad_(arg.requires_grad and tensor.is_floating_point())


def grad_inputs(args: list) -> list[torch.Tensor]:
    """The arguments a gradient is taken with respect to."""
    return [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]

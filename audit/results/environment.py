"""The machine and software a run audits on: what a worker reports once it has imported torch.

The matrix records it (with the registry's digest, the git commit and the run's settings that change verdicts),
the result cache keys cells by it and stores the last one seen, and a diff of two matrices compares it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class Environment:
    """torch's version, Python's, CUDA's (None without CUDA), the devices torch sees, and the platform.

    Plain strings only: a worker sends it to the parent, and unpickling a ``TorchVersion`` would import torch
    there. Unknown facts (no worker reported) are None, with the CPU as the one device.
    """

    torch: str | None = None
    python: str | None = None
    cuda: str | None = None
    devices: tuple[str, ...] = ("cpu",)
    platform: str | None = None

    def to_json(self) -> dict[str, Any]:
        """As the matrix and the cache's store write it (devices as a list)."""
        return {"torch": self.torch, "python": self.python, "cuda": self.cuda, "devices": list(self.devices),
                "platform": self.platform}

    @staticmethod
    def from_json(data: object) -> Environment:
        """The inverse of :meth:`to_json`; ValueError when ``data`` is not one (other keys, a wrong type)."""
        if not isinstance(data, dict) or set(data) != set(FIELDS):
            raise ValueError(f"not an environment: expected the keys {', '.join(FIELDS)}")
        devices = data["devices"]
        texts = [data[name] for name in FIELDS if name != "devices"]
        if not isinstance(devices, list) or not all(isinstance(d, str) for d in devices) \
                or not all(t is None or isinstance(t, str) for t in texts):
            raise ValueError("not an environment: a field has the wrong type")
        return Environment(torch=data["torch"], python=data["python"], cuda=data["cuda"], devices=tuple(devices),
                           platform=data["platform"])


#: The facts an environment holds, in the order a diff lists their changes.
FIELDS = tuple(f.name for f in fields(Environment))

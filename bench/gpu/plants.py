"""What the planted CUDA registry (``bench/gpu/registry.yaml``) must give: each planted bug caught by its check,
with the status expected, and its correct twin passing every cell of the same run.

Each :class:`Plant` is audited by an ``audit run`` of its own: its two entries, its checks, its devices, one
worker (``-j 1``), the bug first. For the illegal memory access and the out-of-memory entry this makes the twin the
neighbour that runs right after the damage, in the worker that replaced the damaged one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

REGISTRY = Path(__file__).resolve().parent / "registry.yaml"


@dataclass(frozen=True)
class Expected:
    """Every cell of ``entry``'s ``check`` on ``device`` (whatever its dtype) has ``status``."""

    entry: str
    check: str
    status: str
    device: str = "cuda"

    def __str__(self) -> str:
        return f"{self.entry} {self.check} ({self.device}): expected {self.status}"


@dataclass(frozen=True)
class Plant:
    """One planted bug beside its twin, audited together."""

    name: str  #: names the plant's run and its folder
    what: str  #: the bug class, in words
    bug: str  #: the planted entry
    twin: str  #: its correct twin, run after it
    checks: tuple[str, ...]
    caught: tuple[Expected, ...]  #: what the bug's cells must say
    devices: tuple[str, ...] = ("cuda",)
    flags: tuple[str, ...] = ()  #: further options of its ``audit run``

    def expected(self) -> tuple[Expected, ...]:
        """What the bug's cells must say, then the twin passing every check on every device of the run."""
        return self.caught + tuple(Expected(self.twin, check, "pass", device)
                                   for check in self.checks for device in self.devices)


PLANTS = (
    Plant("cuda_kernel", "a .cu kernel whose gradient is wrong only on CUDA", "softsign_cuda_grad_wrong",
          "softsign_cuda", ("forward", "gradcheck"),
          (Expected("softsign_cuda_grad_wrong", "gradcheck", "fail"),
           Expected("softsign_cuda_grad_wrong", "gradcheck", "pass", "cpu")), devices=("cpu", "cuda")),
    Plant("host_output", "a Function that returns a CPU tensor for a CUDA input", "tanh_numpy_on_host", "tanh_numpy",
          ("device",), (Expected("tanh_numpy_on_host", "device", "fail"),)),
    Plant("autocast", "float16 autocast on CUDA: a backward outside autocast on float16", "linear_no_amp",
          "linear_amp", ("autocast",), (Expected("linear_no_amp", "autocast", "fail"),)),
    Plant("illegal_access", "an illegal memory access (the CUDA context is lost): the worker is replaced, the "
          "neighbour passes", "double_triton_far_store", "double_triton", ("forward",),
          (Expected("double_triton_far_store", "forward", "error"),)),
    Plant("out_of_memory", "CUDA out of memory in one entry, contained", "double_device_sized_workspace",
          "double_workspace", ("forward",), (Expected("double_device_sized_workspace", "forward", "error"),)),
    Plant("parity", "a CPU/CUDA parity mismatch (each device consistent with itself)", "gelu_fast_on_cuda", "gelu",
          ("gradcheck", "device"),
          (Expected("gelu_fast_on_cuda", "device", "fail"), Expected("gelu_fast_on_cuda", "gradcheck", "pass"))),
    Plant("inductor", "torch.compile with the inductor backend on CUDA (a graph break where one graph is claimed)",
          "cube_item_in_forward", "cube", ("compile",), (Expected("cube_item_in_forward", "compile", "fail"),),
          flags=("--compile-backend", "inductor")),
    Plant("side_stream", "a kernel on a side stream the caller's stream does not wait for", "double_on_side_stream",
          "double_on_side_stream_synchronised", ("forward",), (Expected("double_on_side_stream", "forward", "fail"),)),
    Plant("half_kernel", "a half-only Triton kernel whose backward is 3% off, judged by the precision's own error",
          "softmax_triton_half_off", "softmax_triton_half", ("forward", "gradcheck", "dtype"),
          (Expected("softmax_triton_half_off", "gradcheck", "fail"),
           Expected("softmax_triton_half_off", "dtype", "fail"),
           Expected("softmax_triton_half_off", "forward", "pass"))),
)

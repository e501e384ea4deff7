"""The settings of this process that decide what a computation rounds to: matmul precision and TF32, determinism,
threads, the CPU kernels torch dispatches to, and on CUDA the device, its capability and the library versions.

Each is read from torch itself, each read guarded: a setting this torch lacks is absent, and one that raises when read
(torch 2.13 raises on the legacy TF32 flags once the new API was used) is recorded as what it said. Values are
strings, so that two records compare key by key whatever their torch versions.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import torch


def numerics() -> dict[str, str]:
    """Every readable numerics setting, by a stable name."""
    found: dict[str, str] = {}
    for name, read in READS.items():
        try:
            value = read()
        except Exception as exc:  # a torch without the setting, or one that refuses to say
            value = f"unreadable: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        if value is not None:
            found[name] = str(value)
    for variable in ENVIRONMENT:
        if variable in os.environ:
            found[f"env.{variable}"] = os.environ[variable]
    return found


def _cuda(read: Callable[[], object]) -> Callable[[], object]:
    """``read`` where CUDA is available, else nothing recorded."""
    return lambda: read() if torch.cuda.is_available() else None


def _driver() -> str | None:
    """The NVIDIA driver's version through NVML (torch has no public getter), if NVML answers."""
    try:
        import pynvml  # type: ignore[import-not-found]

        pynvml.nvmlInit()
        return str(pynvml.nvmlSystemGetDriverVersion())
    except Exception:
        return None


READS: dict[str, Callable[[], object]] = {
    "float32_matmul_precision": torch.get_float32_matmul_precision,
    "fp32_precision": lambda: getattr(torch.backends, "fp32_precision", None),
    "cuda.matmul.allow_tf32": lambda: torch.backends.cuda.matmul.allow_tf32,
    "cudnn.allow_tf32": lambda: torch.backends.cudnn.allow_tf32,
    "cuda.matmul.allow_fp16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
    "cuda.matmul.allow_bf16_reduced_precision_reduction":
        lambda: torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
    "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
    "deterministic_warn_only": torch.is_deterministic_algorithms_warn_only_enabled,
    "num_threads": torch.get_num_threads,
    "num_interop_threads": torch.get_num_interop_threads,
    "cpu_capability": lambda: torch.backends.cpu.get_cpu_capability(),
    "mkldnn.enabled": lambda: torch.backends.mkldnn.enabled,
    "default_dtype": lambda: str(torch.get_default_dtype()).removeprefix("torch."),
    "cuda.device_name": _cuda(lambda: torch.cuda.get_device_name()),
    "cuda.capability": _cuda(lambda: ".".join(map(str, torch.cuda.get_device_capability()))),
    "cuda.version": lambda: torch.version.cuda,
    "cudnn.version": _cuda(lambda: torch.backends.cudnn.version()),
    "cuda.driver": _cuda(_driver),
}
#: Environment variables that change the kernels torch picks or how they round.
ENVIRONMENT = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY", "CUBLAS_WORKSPACE_CONFIG",
               "NVIDIA_TF32_OVERRIDE", "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE")

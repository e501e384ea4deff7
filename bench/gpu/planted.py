"""Planted CUDA bugs for the device acceptance run (``bench/gpu/registry.yaml``), each beside its correct twin.

Each bug shows only on a CUDA device: on the CPU most of these are correct, or never run. Which check catches
each, and with what status, is in :mod:`bench.gpu.plants`. The native operator whose CUDA backward kernel is wrong
lives in ``csrc/softsign.cpp`` and ``csrc/softsign.cu``; where the CPU suite's fixtures already are the bug or the
twin (``tests.fixtures``: x @ w without autocast decorators, ``.item()`` in forward, the cube), the registry names
them.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tests.fixtures.transforms import LinearNoAmp

try:
    import triton
    import triton.language as tl
except ImportError:  # the CPU tests read this registry without running its entries
    triton = None


def doubled(x):
    """2x: the reference of every doubling below."""
    return 2 * x


# --- a Function that returns a CPU tensor for a CUDA input ------------------------------------------------------

class NumpyTanh(torch.autograd.Function):
    """tanh through numpy: the result stays on the host whatever the input's device."""

    @staticmethod
    def forward(ctx, x):
        y = torch.from_numpy(np.tanh(x.detach().cpu().numpy()))
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (1 - y * y)


class NumpyTanhOnDevice(NumpyTanh):
    """The twin: the numpy result goes back to the input's device."""

    @staticmethod
    def forward(ctx, x):
        y = torch.from_numpy(np.tanh(x.detach().cpu().numpy())).to(x.device)
        ctx.save_for_backward(y)
        return y


# --- float16 autocast on CUDA -------------------------------------------------------------------------------------
# The bug is tests.fixtures.transforms.LinearNoAmp (x @ w, undecorated), whatever the device; its twin there is
# decorated for the CPU's autocast, which CUDA's does not trigger. This one is decorated for CUDA's.

class LinearAmp(LinearNoAmp):
    """The twin on CUDA: the same forward and backward, the backward run under the forward's CUDA autocast state."""

    forward = staticmethod(torch.amp.custom_fwd(LinearNoAmp.forward, device_type="cuda"))
    backward = staticmethod(torch.amp.custom_bwd(LinearNoAmp.backward, device_type="cuda"))


# --- a CPU/CUDA parity mismatch -----------------------------------------------------------------------------------

def _gelu(x):
    cdf = 0.5 * (1 + torch.erf(x / math.sqrt(2)))
    return x * cdf, cdf + x * torch.exp(-x * x / 2) / math.sqrt(2 * math.pi)


def _gelu_tanh(x):
    inner = math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)
    t = torch.tanh(inner)
    slope = math.sqrt(2 / math.pi) * (1 + 3 * 0.044715 * x * x)
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * slope


class Gelu(torch.autograd.Function):
    """GELU (the exact, erf form), with its derivative written out: the same on every device."""

    @staticmethod
    def forward(ctx, x):
        y, dy = _gelu(x)
        ctx.save_for_backward(dy)
        return y

    @staticmethod
    def backward(ctx, grad):
        (dy,) = ctx.saved_tensors
        return grad * dy


class GeluFastOnCuda(Gelu):
    """A faster GELU on CUDA (the tanh approximation, its own derivative consistent with it), the exact one on the
    CPU: each device's gradient matches its own forward, yet the devices disagree by up to about 1e-3."""

    @staticmethod
    def forward(ctx, x):
        y, dy = _gelu_tanh(x) if x.is_cuda else _gelu(x)
        ctx.save_for_backward(dy)
        return y


# --- CUDA out of memory, in one entry ------------------------------------------------------------------------------

def _doubled_through(x, elements: int):
    """2x, with x copied first into a scratch buffer of ``elements`` elements."""
    scratch = torch.empty(elements, dtype=x.dtype, device=x.device)
    scratch[: x.numel()] = x.reshape(-1)
    return scratch[: x.numel()].reshape(x.shape) * 2


class DoubleWithWorkspace(torch.autograd.Function):
    """2x through a scratch buffer sized by the input."""

    @staticmethod
    def forward(ctx, x):
        return _doubled_through(x, x.numel())

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class DoubleWithDeviceSizedWorkspace(DoubleWithWorkspace):
    """Sizes its scratch buffer by a constant meant for a far larger device: 10**13 elements, which no GPU has
    (CUDA's allocator refuses it: torch.OutOfMemoryError)."""

    @staticmethod
    def forward(ctx, x):
        return _doubled_through(x, 10 ** 13)


# --- an illegal memory access, in one entry (Triton) ---------------------------------------------------------------

BLOCK = 64
#: The bug's stride: lane k stores 2**36 elements (512 GiB of float64) further than lane k - 1, far outside any
#: allocation, with no mask: the kernel faults, and the process's CUDA context is lost.
FAR = 1 << 36

if triton is not None:
    @triton.jit
    def _double_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, 2 * tl.load(x_ptr + offs, mask=mask), mask=mask)

    @triton.jit
    def _double_strided_kernel(x_ptr, out_ptr, n, stride, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offs, mask=offs < n)
        tl.store(out_ptr + offs * stride, 2 * x)  # the bug: no mask, and a stride in the wrong unit


class TritonDouble(torch.autograd.Function):
    """2x with a Triton kernel (masked store). The neighbour that must still pass after the illegal access."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _double_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), BLOCK=BLOCK)
        return out

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class TritonDoubleFarStore(TritonDouble):
    """The same doubling whose kernel stores without a mask at a stride of :data:`FAR` elements."""

    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        _double_strided_kernel[(triton.cdiv(x.numel(), BLOCK),)](x, out, x.numel(), FAR, BLOCK=BLOCK)
        return out


# --- a kernel on a side stream, without synchronisation -------------------------------------------------------------

#: GPU clock cycles the side stream spins before it writes (about 50 ms at 2 GHz, more at idle clocks): the
#: default stream reads the output long before, so the race has one outcome, and the bug is seen every time.
SPIN = 100_000_000


def _doubled_on_a_side_stream(x, synchronised: bool):
    caller, side = torch.cuda.current_stream(x.device), torch.cuda.Stream(x.device)
    out = torch.zeros_like(x)
    if synchronised:
        side.wait_stream(caller)  # x and out are ready before the side stream reads and writes them
    with torch.cuda.stream(side):
        torch.cuda._sleep(SPIN)  # a long kernel before the one that matters
        out.copy_(x * 2)
    if synchronised:
        caller.wait_stream(side)  # the caller's later work, and the buffer's reuse, wait for the write
    return out


class DoubleOnSideStream(torch.autograd.Function):
    """2x computed on a side stream after a long kernel, returned without making the caller's stream wait: the
    caller reads the buffer before it is written (zeros), and the late write lands in memory already reused."""

    @staticmethod
    def forward(ctx, x):
        return _doubled_on_a_side_stream(x, synchronised=False)

    @staticmethod
    def backward(ctx, grad):
        return 2 * grad


class DoubleOnSideStreamSynchronised(DoubleOnSideStream):
    """The twin: each stream waits for the other where it must."""

    @staticmethod
    def forward(ctx, x):
        return _doubled_on_a_side_stream(x, synchronised=True)

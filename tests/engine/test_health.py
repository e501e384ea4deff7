"""The worker's own health: which exceptions mean damage, the bounds of the checkup between entries, and what a
cell says when the target raised KeyboardInterrupt or forked a copy of the process that came back."""

from __future__ import annotations

import errno
import io
import os

import pytest

from audit.results.outcome import ERRORED, HELD
from audit.runtime import channel, health
from tests.helpers import entry, observe

D = "tests.fixtures.damage"
ROWS = {"inputs": [{"shape": ["N"]}], "dims": {"N": [1, 3]}}


def _chained(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:
        return caught


@pytest.mark.parametrize("exc", [MemoryError(), RecursionError("maximum recursion depth exceeded"),
                                 SystemError("error return without exception set"), KeyboardInterrupt(),
                                 SystemExit(3), GeneratorExit(),
                                 OSError(errno.EAGAIN, "Resource temporarily unavailable"),
                                 OSError(errno.ENOMEM, "Cannot allocate memory"),
                                 RuntimeError("can't start new thread"),
                                 RuntimeError("[enforce fail] DefaultCPUAllocator: can't allocate memory"),
                                 ImportError("libfoo.so: failed to map segment from shared object")],
                         ids=lambda e: type(e).__name__)
def test_exceptions_that_mean_the_process_may_be_damaged(exc):
    assert health.damage(exc)
    assert health.damage(_chained(RuntimeError("wrapped"), exc))  # found through the chain of causes


@pytest.mark.parametrize("exc", [ValueError("bad"), RuntimeError("shapes do not match"), ZeroDivisionError(),
                                 OSError(errno.ENOENT, "No such file or directory"), TypeError("x")],
                         ids=lambda e: type(e).__name__)
def test_ordinary_exceptions_are_the_targets_own_failures(exc):
    assert health.damage(exc) == ""


def test_the_bounds_name_what_grew():
    start = health.Reading(threads=3, descriptors=10, resident=400 << 20, address=2 << 30)
    bounds = health.Bounds(start, max_memory=8 << 30)
    assert bounds.exceeded(start) == ""
    assert "threads grew by 65" in bounds.exceeded(health.Reading(68, 10, 400 << 20, 2 << 30))
    assert "open descriptors" in bounds.exceeded(health.Reading(3, 300, 400 << 20, 2 << 30))
    assert "resident memory grew by 3073 MiB" in bounds.exceeded(health.Reading(3, 10, 3473 << 20, 2 << 30))
    assert bounds.exceeded(health.Reading(3, 10, 400 << 20, 6 << 30)) == ""  # 4 GiB of an 8 GiB cap: half
    assert "address space" in bounds.exceeded(health.Reading(3, 10, 400 << 20, (6 << 30) + (1 << 20)))


def test_the_checkup_passes_a_healthy_process_and_recycles_a_worker_after_its_quota():
    bounds = health.Bounds(health.read())
    assert health.checkup(bounds, served=1) == ""
    assert "served 200 entries" in health.checkup(bounds, served=health.MAX_ENTRIES)


def test_a_keyboard_interrupt_the_target_raises_is_an_error_cell_that_says_so(tmp_path):
    found = observe(entry(tmp_path, target=f"{D}:Interrupter", **ROWS), "forward")
    assert found.verdict == ERRORED
    assert found.message.startswith("the target raised KeyboardInterrupt (at "), found.message
    assert "on example" in found.message
    assert health.taken() == "the target raised KeyboardInterrupt"  # and the worker would retire after it


def test_a_forked_child_that_returns_into_the_audit_is_ended_and_named(tmp_path):
    me = os.getpid()
    found = observe(entry(tmp_path, target=f"{D}:ForkReturner", **ROWS), "forward")
    assert os.getpid() == me  # only the original process gets here
    assert found.verdict == ERRORED
    assert "the target forked this process (pid " in found.message, found.message
    assert "os.fork() without os._exit() in the child" in found.message
    assert health.taken()
    twin = observe(entry(tmp_path, target="tests.fixtures.broken:Cube", **ROWS), "forward")
    assert twin.verdict == HELD, twin.message  # no stray is carried over to the next cell


def test_only_the_end_of_each_write_reaches_the_log():
    stream = io.StringIO()
    tail = channel._Tail(stream)
    assert tail.write("a" * (channel.TAIL_BYTES * 4) + "last line\n") == channel.TAIL_BYTES * 4 + 10
    assert len(stream.getvalue()) == channel.TAIL_BYTES and stream.getvalue().endswith("last line\n")
    print("short", file=tail)
    assert stream.getvalue().endswith("last line\nshort\n")


def test_a_worker_gets_one_thread_per_numerical_library_unless_the_user_chose(monkeypatch):
    """OpenMP, MKL, OpenBLAS and numba pools sized to the machine oversubscribe it with several workers (a
    numba-parallel target's 0.8 s cell took 28 s at -j 2) and tie a reduction's rounding to the core count."""
    from audit.engine.pool import THREAD_POOLS, _worker_env
    from audit.runtime.options import RunOptions

    for name in THREAD_POOLS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "4")
    env = _worker_env(RunOptions())
    assert {name: env[name] for name in THREAD_POOLS} == {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "4",
                                                        "OPENBLAS_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}


class AcceleratorError(RuntimeError):
    """What torch (2.8 and later) raises for a CUDA error: a RuntimeError by that name."""


@pytest.mark.parametrize("exc", [AcceleratorError("CUDA error: an illegal memory access was encountered"),
                                 RuntimeError("CUDA error: device-side assert triggered"),
                                 RuntimeError("Triton Error [CUDA]: an illegal memory access was encountered"),
                                 RuntimeError("CUDA out of memory. Tried to allocate 9094.95 GiB. GPU 0 has a total "
                                              "capacity of 139.81 GiB")],
                         ids=["illegal-access", "device-assert", "triton", "out-of-memory"])
def test_a_lost_cuda_context_or_cuda_out_of_memory_is_damage(exc):
    """A sticky CUDA error fails every later CUDA call of the process; memory the allocator refused may be held
    by a neighbour: either way the worker must not serve another entry."""
    assert health.damage(exc)
    assert health.damage(_chained(RuntimeError("the reference raised"), exc))


def test_a_cuda_error_that_leaves_the_context_usable_is_the_targets_failure():
    assert health.damage(AcceleratorError("CUDA error: invalid configuration argument")) == ""


LOST = "the CUDA context is lost (AcceleratorError: illegal memory access)"


def test_a_synchronisation_that_raises_says_the_context_is_lost(monkeypatch):
    import torch

    def fault():
        raise AcceleratorError("CUDA error: an illegal memory access was encountered")

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", fault)
    assert health.cuda_fault() == LOST
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    assert health.cuda_fault() == ""


def test_a_process_that_never_used_cuda_is_not_synchronised(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: pytest.fail("synchronised a process without CUDA"))
    assert health.cuda_fault() == ""


def test_the_checkup_retires_a_worker_whose_cuda_context_is_lost(monkeypatch):
    monkeypatch.setattr(health, "cuda_fault", lambda: LOST)
    assert health.checkup(health.Bounds(health.read()), 1) == LOST


def test_a_fault_found_when_a_cuda_cell_ends_makes_it_an_error_and_retires_the_worker(monkeypatch):
    from audit.engine.cell import _settled
    from audit.results.outcome import CellKey, Outcome

    monkeypatch.setattr(health, "cuda_fault", lambda: LOST)
    health.own()
    held = _settled(Outcome(CellKey("forward", "float64", "cuda"), HELD, examples=3))
    assert held.verdict == ERRORED and held.examples == 3
    assert held.message.startswith(f"{LOST}, found when the cell ended")
    assert health.taken() == LOST
    on_cpu = Outcome(CellKey("forward", "float64", "cpu"), HELD)
    assert _settled(on_cpu) is on_cpu and health.taken() == ""  # a CPU cell is never synchronised


def test_putting_back_the_generators_of_a_lost_cuda_context_notes_the_damage(monkeypatch):
    import torch

    from audit.runtime import isolation

    def raises(message):
        def set_rng_state_all(states):
            raise AcceleratorError(message)
        return set_rng_state_all

    monkeypatch.setattr(torch.cuda, "set_rng_state_all", raises("CUDA error: an illegal memory access was encountered"))
    health.own()
    isolation._restore_cuda_generators([])
    assert health.taken() == LOST
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", raises("some other failure"))
    with pytest.raises(AcceleratorError, match="some other failure"):  # not the context's loss: not swallowed
        isolation._restore_cuda_generators([])

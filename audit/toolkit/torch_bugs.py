"""PyTorch's own bugs that a check can meet: reported as PyTorch's, never blamed on the entry.

When a check meets one it raises :class:`TorchBugHit`, a :class:`NotApplicable`: the cell is a ``skip``
whose reason names the bug, its upstream issues and the torch version here. It is detected from
behaviour, not from a version table, so the day torch fixes it the cell turns into a real verdict and
``audit diff`` shows the change.
"""

from __future__ import annotations

from dataclasses import dataclass

from audit.kit.refusal import NotApplicable


@dataclass(frozen=True)
class TorchBug:
    """One known PyTorch defect: what it does, where it is tracked, where it was seen."""

    summary: str
    issues: tuple[str, ...]
    seen: str

    def reason(self) -> str:
        """The skip reason: what, which upstream issues, which torch versions, and whose it is."""
        import torch

        return (f"PyTorch bug, not the entry's: {self.summary} ({', '.join(self.issues)}; seen on torch "
                f"{self.seen}; this run: torch {torch.__version__}); the cell will report a verdict once torch "
                "fixes it")


class TorchBugHit(NotApplicable):
    """The check ran into a known PyTorch bug and cannot judge the entry here."""

    def __init__(self, bug: TorchBug, context: str = ""):
        super().__init__(bug.reason() + (f"; here: {context}" if context else ""))
        self.bug = bug


CUSTOM_OP_FUNCTORCH = TorchBug(
    summary="torch.func's vjp/grad/jacrev refuse a torch.library custom op with register_autograd "
            "('must override the setup_context staticmethod', though one is given): register_autograd "
            "builds an old-style autograd.Function internally",
    issues=("pytorch/pytorch#168393", "pytorch/pytorch#179652", "pytorch/pytorch#170834"),
    seen="2.13.0 and 2.14.1 (reported since 2.4)")

CUSTOM_OP_ZERO_JVP = TorchBug(
    summary="torch.func.jvp/jacfwd over a torch.library custom op silently return a zero tangent "
            "(the registered forward-mode formula is not used)",
    issues=("pytorch/pytorch#168393", "pytorch/pytorch#170834"),
    seen="2.13.0 and 2.14.1")

COMPILE_MARK_DIRTY = TorchBug(
    summary="torch.compile drops ctx.mark_dirty of an in-place autograd.Function: the compiled gradient "
            "through the written input is wrong (eager's is right)",
    issues=("pytorch/pytorch#184113", "pytorch/pytorch#133491", "pytorch/pytorch#180642"),
    seen="2.13.0 (fixed upstream by pytorch/pytorch#184267)")

#: Every bug above, for the docs (docs/checks.md) and for reports that list them.
KNOWN = (CUSTOM_OP_FUNCTORCH, CUSTOM_OP_ZERO_JVP, COMPILE_MARK_DIRTY)


_CANARIES: dict = {}


def compile_drops_mark_dirty(backend: str) -> bool:
    """Whether this torch's compile gets the gradient of the smallest in-place Function wrong (once per
    process and backend; resets Dynamo, so call it before compiling what the cell compiles)."""
    if backend not in _CANARIES:
        _CANARIES[backend] = _mark_dirty_canary(backend)
    return _CANARIES[backend]


def _mark_dirty_canary(backend: str) -> bool:
    import torch

    class TimesTwoInPlace(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    def grad(compiled: bool) -> torch.Tensor:
        torch._dynamo.reset()
        w = torch.ones(3, dtype=torch.float64, requires_grad=True)
        apply = torch.compile(TimesTwoInPlace.apply, backend=backend) if compiled else TimesTwoInPlace.apply
        apply(w.clone()).sum().backward()  # as the compile check calls it: the clone outside the compiled call
        return w.grad

    try:
        return not torch.equal(grad(compiled=True), grad(compiled=False))
    except Exception:  # the canary cannot tell: let the check judge
        return False
    finally:
        torch._dynamo.reset()

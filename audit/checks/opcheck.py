"""``opcheck`` (kind ``op``): torch.library.opcheck's utilities on drawn inputs, contiguous or not.

opcheck checks the registration (schema, autograd kernel, fake kernel, AOT dispatch), never whether a
gradient is right: the gradient checks still run on ops.
"""

from __future__ import annotations

import torch

from audit.catalog.checks import declared
from audit.checking.judgement import Stage


def opcheck(fn, ref, args, *, target, noncontiguous, observe=None) -> list:
    """Every utility of torch.library.opcheck on the op itself (``target``), on ``args`` as drawn when
    ``noncontiguous`` is claimed, else contiguous copies; one line naming each failing utility, with torch's first
    line and what it means. ``observe(results)``, if given, is told each utility's result."""
    utils = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")
    xs = args if noncontiguous else [a.detach().clone(memory_format=torch.contiguous_format)
                                     .requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a
                                     for a in args]
    results = torch.library.opcheck(target, tuple(xs), test_utils=utils, raise_exception=False)
    if observe is not None:
        observe(results)
    failed = [(name, result) for name, result in results.items() if result != "SUCCESS"]
    if not failed:
        return []
    return ["; ".join(f"{name} failed: {opcheck_line(result)} ({opcheck_hint(name)})" for name, result in failed)]


def opcheck_line(exc) -> str:
    """What a failing utility raised: its type and first line that is not opcheck's own preamble."""
    text = str(exc).strip()
    kind = type(exc).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("opcheck(op, ...):", "Traceback")):
            return f"{kind}: {line[:300]}"
    return kind


def opcheck_hint(name: str) -> str:
    """What a failure of the utility ``name`` means, and where to look."""
    return {
        "test_schema": "the op mutates or aliases an argument its schema does not declare (mutates_args)",
        "test_autograd_registration": "no kernel at an Autograd key: use register_autograd, not an "
                                      "autograd.Function registered at a backend key",
        "test_faketensor": "the fake (meta) kernel is missing or disagrees with the real one in shape, strides, "
                           "dtype or device: register_fake in Python, a Meta kernel in C++",
        "test_aot_dispatch_dynamic": "AOTAutograd (torch.compile's autograd) fails or disagrees with eager: "
                                     "often a missing register_autograd or a fake kernel that cannot trace",
    }.get(name, "see opcheck")


def recorded(subject, case):
    """An ``observe`` for :func:`opcheck` that records each utility's pass or fail in ``metrics.utils``."""
    def observe(results):
        subject.metrics["utils"] = {name: "pass" if result == "SUCCESS" else "fail"
                                    for name, result in sorted(results.items())}

    return observe


CHECK = declared(
    "opcheck",
    stages=(Stage(observe=recorded),),
    replay=opcheck,
    replay_helpers=(opcheck_line, opcheck_hint),
    script_values=lambda subject, case: {"noncontiguous": subject.entry.supports.noncontiguous},
)

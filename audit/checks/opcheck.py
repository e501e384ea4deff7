"""``opcheck`` (kind ``op``): torch.library.opcheck's utilities on drawn inputs, contiguous or not.

opcheck checks the registration (schema, autograd kernel, fake kernel, AOT dispatch), never whether a
gradient is right: the gradient checks still run on ops.
"""

from __future__ import annotations

import torch

from audit.checks.catalog import declared
from audit.checks.interface import Violation

UTILS = ("test_schema", "test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic")

HINTS = {
    "test_schema": "the op mutates or aliases an argument its schema does not declare (mutates_args)",
    "test_autograd_registration": "no kernel at an Autograd key: use register_autograd, not an "
                                  "autograd.Function registered at a backend key",
    "test_faketensor": "the fake (meta) kernel is missing or disagrees with the real one in shape, strides, "
                       "dtype or device: register_fake in Python, a Meta kernel in C++",
    "test_aot_dispatch_dynamic": "AOTAutograd (torch.compile's autograd) fails or disagrees with eager: "
                                 "often a missing register_autograd or a fake kernel that cannot trace",
}


def run(subject, case) -> None:
    """Every utility; a failure names each failing one, with torch's first line and what it means."""
    args = subject.args(case) if subject.entry.supports.noncontiguous else subject.contiguous_args(case)
    results = torch.library.opcheck(subject.target.obj, tuple(args), test_utils=UTILS, raise_exception=False)
    subject.metrics["utils"] = {name: _passed(result) for name, result in sorted(results.items())}
    failed = [(name, result) for name, result in results.items() if result != "SUCCESS"]
    if failed:
        raise Violation("; ".join(f"{name} failed: {_first_line(result)} ({HINTS.get(name, 'see opcheck')})"
                                  for name, result in failed))


def _passed(result) -> str:
    return "pass" if result == "SUCCESS" else "fail"


def _first_line(exc) -> str:
    text = str(exc).strip()
    kind = type(exc).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("opcheck(op, ...):", "Traceback")):
            return f"{kind}: {line[:300]}"
    return kind


CHECK = declared(
    "opcheck",
    run=run,
    script=f"""\
utils = {UTILS!r}
xs = args if noncontiguous else [a.detach().clone(memory_format=torch.contiguous_format).requires_grad_(a.requires_grad)
                                 if torch.is_tensor(a) else a for a in args]
results = torch.library.opcheck(fn, tuple(xs), test_utils=utils, raise_exception=False)
for name, result in sorted(results.items()):
    said = "pass" if result == "SUCCESS" else f"FAIL: {{type(result).__name__}}: {{(str(result).strip().splitlines() or [''])[0][:300]}}"
    print(name, said)
sys.exit(0 if all(result == "SUCCESS" for result in results.values()) else 1)
""",
    script_values=lambda subject, case: {"noncontiguous": subject.entry.supports.noncontiguous},
)

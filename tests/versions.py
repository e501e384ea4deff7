"""Every version-specific expectation of the tests, in one place: what a test needs of torch, and the planted
bugs a torch version cannot reach, each with the reason. CI runs the suite under each stack the README lists;
a test that depends on a torch feature says so here instead of failing elsewhere."""

from __future__ import annotations

import pytest
import torch
from packaging.specifiers import SpecifierSet
from packaging.version import Version

#: This torch's release, without its local build tag (2.11.0+cu130 is 2.11.0).
TORCH = Version(Version(torch.__version__).base_version)

#: Strict export (Dynamo) of a setup_context-style autograd.Function: torch 2.11.0 refuses to trace any
#: ("UserError: GetAttrVariable(AutogradFunctionVariable(), setup_context) has no type"); 2.13.0 traces them.
#: 2.12 was not tried, so the bound is the first version seen to trace.
STRICT_EXPORT_OF_FUNCTIONS = (">=2.13", "strict export cannot trace a setup_context-style autograd.Function "
                                        "before torch 2.13 (2.11.0: GetAttrVariable(AutogradFunctionVariable(), "
                                        "setup_context) has no type)")


def torch_satisfies(spec: str) -> bool:
    """Whether this torch's release is in ``spec`` (a PEP 440 specifier such as ">=2.13")."""
    return TORCH in SpecifierSet(spec)


def requires_torch(spec: str, reason: str) -> pytest.MarkDecorator:
    """A skip, with ``reason`` and this torch's version, where this torch is not in ``spec``."""
    return pytest.mark.skipif(not torch_satisfies(spec), reason=f"needs torch {spec} (this: {torch.__version__}): "
                                                                f"{reason}")


#: Planted bugs (target, check) that a torch outside the specifier cannot reach, and why; the test that
#: catches each is a skip there, and another test proves what the cell says instead.
UNREACHABLE = {
    ("tests.fixtures.transforms:CachedByIdentity", "export"): STRICT_EXPORT_OF_FUNCTIONS,
}


def reachable(target: str, check: str) -> tuple[pytest.MarkDecorator, ...]:
    """The marks of the test that catches the planted bug ``target`` with ``check``: a skip where this torch
    cannot reach it (:data:`UNREACHABLE`), none elsewhere."""
    found = UNREACHABLE.get((target, check))
    return (requires_torch(*found),) if found else ()

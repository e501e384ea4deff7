"""Fixtures that plant no cell failure to replay, by module and one by one, each with why: a behaviour change
across environments (tests/behaviour), a registry mistake refused with a message, a message's wording, a false alarm
at chosen points."""

from __future__ import annotations

import importlib
import inspect

#: Whole fixture modules, with why none of their fixtures has a replay row.
MODULES = {
    "tests.fixtures.drift": "moves its behaviour between two environments while every cell passes in both: "
                            "tests/behaviour compares their records (a cell has nothing to replay)",
    "tests.fixtures.mistakes": "a mistake in what a registry names, refused with a message when the target loads or "
                               "as an error cell (tests/engine/test_user_mistakes.py): no failing property to replay",
    "tests.fixtures.constants": "correct: targets with constant tensor arguments (tests/registry/test_constants.py)",
}

B, ILL = "tests.fixtures.broken", "tests.fixtures.ill_conditioned"
ONE_BY_ONE = {
    f"{B}:float32_weights": "raises in float64 by design: the wording of the float32 cell's message "
                            "(tests/checks/test_blame.py)",
    f"{B}:TwoOutputsBackwardRaises": "raises whatever its gradients: the wording of undefined_grad's message "
                                     "(tests/checks/test_blame.py)",
    f"{ILL}:sqrt_of_symmetric": "correct: the false alarm at nearly repeated eigenvalues, at one chosen matrix "
                                "(tests/checks/test_reference_conditioning.py); drawn matrices are not positive "
                                "definite",
    f"{ILL}:sqrt_of_symmetric_reference": "a reference",
    f"{ILL}:SlightlyOffSqrt": "the planted 1e-6 at one chosen well-conditioned matrix "
                              "(tests/checks/test_reference_conditioning.py): drawn matrices are not positive definite",
    f"{ILL}:slightly_off_sqrt_of_symmetric": "the same plant, as the entry's callable",
    f"{ILL}:eigenvalues_at": "a helper making the tests' matrix, not a target",
}


def not_replayed() -> dict[str, str]:
    """Each fixture of :data:`MODULES` with its module's reason, and :data:`ONE_BY_ONE`."""
    found = dict(ONE_BY_ONE)
    for name, reason in MODULES.items():
        module = importlib.import_module(name)
        found.update({f"{name}:{key}": reason for key, value in vars(module).items()
                      if not key.startswith("_") and getattr(value, "__module__", None) == name
                      and (inspect.isclass(value) or inspect.isfunction(value))})
    return found

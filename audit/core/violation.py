"""What a check raises besides the kit's :class:`~audit.kit.refusal.NotApplicable` (a skip): a :class:`Violation`
fails the case, a :class:`RegistryFault` makes it an error that blames the registry's own callable.

Defined below the checks so that their helpers raise them too; :mod:`audit.catalog.interface` re-exports all three
for a repository's own checks.
"""

from __future__ import annotations


class Violation(Exception):
    """The property did not hold on a case; the message says what, where and by how much.

    ``kind`` is what the failure is, without where or by how much: the search shrinks a failure only into cases
    that fail the same way, and reports failures of other kinds apart (:mod:`audit.engine.explore`). A message
    from the replay kit carries its own (:class:`audit.kit.compare.Finding`); otherwise it is the message up to its
    first ": " (the house style puts what failed before the colon, the numbers after it), or the whole message."""

    def __init__(self, message: str = "", kind: str = ""):
        super().__init__(message)
        self.kind = kind or getattr(message, "kind", "") or str(message).split(": ", 1)[0]


class RegistryFault(Exception):
    """What the registry supplied, not the target, is at fault on a case (the entry's ``proxy`` raised, or its
    gradient is undefined or off its own finite differences there; a kind model factory's ``make_batch`` returned
    a batch in no accepted form): the search stops and the cell is an ``error`` saying so, never a failure of the
    target."""

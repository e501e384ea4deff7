"""What a check's property raises: a :class:`Violation` fails the case, :class:`NotApplicable` skips the cell.

Defined below the checks so that their helpers raise them too; :mod:`audit.checks.interface` re-exports both for
a repository's own checks.
"""

from __future__ import annotations


class Violation(Exception):
    """The property did not hold on a case; the message says what, where and by how much."""


class NotApplicable(Exception):
    """The check cannot say anything about this entry here (e.g. no CUDA); the cell is a skip."""

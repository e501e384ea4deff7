"""What a property raises when it has nothing to say about a case: the audit's cell is then a skip saying why, and
a replay script stops there. Imports no torch: the check interface re-exports it without torch."""

from __future__ import annotations


class NotApplicable(Exception):
    """The check cannot say anything about this entry or case here (no CUDA, no batch axis); the cell is a skip."""

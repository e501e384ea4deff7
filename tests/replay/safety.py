"""Planted bugs replayed: (filled in by its owner)."""

from __future__ import annotations

from tests.replay import Planted

ROWS: list[Planted] = []

#: fixture name ("module:Name") -> why it has no row (a reference, a helper, a correct-only fixture...)
NOT_REPLAYED: dict[str, str] = {}

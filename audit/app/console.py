"""How output meets a terminal: colour by the conventions every CLI follows (NO_COLOR, FORCE_COLOR)."""

from __future__ import annotations

import os


def color(stream) -> bool:
    """Whether to colour ``stream``: never with ``NO_COLOR`` set (no-color.org), always with
    ``FORCE_COLOR`` set (CI logs that render ANSI), else only on a terminal."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    return hasattr(stream, "isatty") and stream.isatty()

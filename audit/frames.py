"""Which stack frames are the user's: everything outside the audit's own code, torch and the standard
library's contextlib (the frames a failure message and a scan site should point at)."""

from __future__ import annotations

import contextlib
import traceback
from pathlib import Path

import torch

#: The audit's package (this module's folder), torch's, and the standard library's (contextlib's folder).
LIBRARY_DIRS = (str(Path(__file__).parent), str(Path(torch.__file__).parent), str(Path(contextlib.__file__).parent))


def is_user(filename: str) -> bool:
    """Whether ``filename`` is user code (not the audit, torch or the standard library)."""
    return not filename.startswith(LIBRARY_DIRS)


def user_site(exc: BaseException) -> str:
    """`` (at file:line in function)`` for the innermost user frame of ``exc``'s traceback (else the
    innermost frame), or "" when it has none."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if is_user(f.filename)]
    frame = (own or frames)[-1] if frames else None
    return f" (at {frame.filename}:{frame.lineno} in {frame.name})" if frame else ""

"""Which stack frames are the user's: everything outside the audit's own code, torch and the standard
library (the frames a failure message and a scan site should point at). The replay kit holds the rule
(:func:`audit.kit.explain.library_folders`, :func:`audit.kit.explain.user_site`), so that a replay script names the
same site; the checks import ``user_site`` from there."""

from __future__ import annotations

from audit.kit.explain import library_folders

#: The audit's package (the kit's folder), torch's and the standard library's.
LIBRARY_DIRS = library_folders()


def is_user(filename: str) -> bool:
    """Whether ``filename`` is user code (not the audit, torch or the standard library)."""
    return not filename.startswith(LIBRARY_DIRS)


"""Owners from a CODEOWNERS file (GitHub's rules: the last matching pattern wins)."""

from __future__ import annotations

import fnmatch
from pathlib import Path

LOCATIONS = ("CODEOWNERS", ".github/CODEOWNERS", "docs/CODEOWNERS")


def load(root: Path) -> list[tuple[str, list[str]]]:
    """(pattern, owners) rules from the first CODEOWNERS found under ``root``."""
    for location in LOCATIONS:
        path = root / location
        if path.is_file():
            rules = []
            for line in path.read_text().splitlines():
                line = line.split("#", 1)[0].strip()
                if line:
                    pattern, *owners = line.split()
                    rules.append((pattern, owners))
            return rules
    return []


def owners(rules, path: str) -> list[str]:
    """The owners of ``path`` (relative, with forward slashes): the last rule that matches."""
    found: list[str] = []
    for pattern, who in rules:
        if _matches(pattern, path):
            found = who
    return found


def _matches(pattern: str, path: str) -> bool:
    anchored = pattern.startswith("/")
    pattern = pattern.lstrip("/")
    if pattern.endswith("/"):
        return path.startswith(pattern) if anchored else (path.startswith(pattern) or f"/{pattern}" in f"/{path}")
    if "/" not in pattern and not anchored:
        return fnmatch.fnmatch(Path(path).name, pattern) or any(
            fnmatch.fnmatch(part, pattern) for part in Path(path).parts[:-1])
    return fnmatch.fnmatch(path, pattern) or fnmatch.fnmatch(path, pattern.rstrip("*") + "*") and pattern.endswith("**")

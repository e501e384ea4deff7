"""Owners from a CODEOWNERS file (GitHub's rules: the last matching pattern wins)."""

from __future__ import annotations

import functools
from pathlib import Path

import pathspec

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
        if matches(pattern, path):
            found = who
    return found


def matches(pattern: str, path: str) -> bool:
    """GitHub's CODEOWNERS matching: gitignore's rules (pathspec's maintained implementation), except
    that a pattern ending in ``/*`` owns only the files directly in that folder, not deeper ones
    (``docs/*`` owns ``docs/a.md``, not ``docs/a/b.md``), as GitHub documents."""
    if not _spec(pattern).match_file(path):
        return False
    if pattern.endswith("/*") and "**" not in pattern:
        return len(path.split("/")) == len(pattern.strip("/").split("/"))
    return True


@functools.lru_cache(maxsize=1024)
def _spec(pattern: str) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines([pattern])

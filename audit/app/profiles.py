"""Run profiles for the tool's three uses, built in and overridable in the registry's ``profiles``.

A profile names values for some of the settings a profile may set (:mod:`audit.runtime.settings`); a flag or
``pyproject.toml`` wins over it, and what it leaves out keeps its default (:func:`~audit.runtime.settings.settle`).
"""

from __future__ import annotations

from dataclasses import dataclass

from audit.core.errors import UsageError


@dataclass(frozen=True)
class Profile:
    """A named set of run settings: (setting, value) pairs, each a setting a profile may set."""

    name: str
    values: tuple[tuple[str, object], ...] = ()


#: premerge: fast and cached, for every pull request; intake: the defaults, thorough enough for a new
#: model; upgrade: more examples and the real compiler, nothing reused, and a behaviour record, for accepting a new
#: torch.
BUILTIN = {
    "premerge": Profile("premerge", (("examples", 10), ("cache", True))),
    "intake": Profile("intake"),
    "upgrade": Profile("upgrade", (("examples", 50), ("compile_backend", "inductor"), ("record", True))),
}
#: No ``--profile``: every setting at its default.
DEFAULT = Profile("default")


def profile(name: str | None, registry) -> Profile:
    """The named profile with the registry's overrides applied (the defaults when ``name`` is None)."""
    overrides = dict(registry.profiles)
    if name is None:
        return DEFAULT
    if name not in BUILTIN and name not in overrides:
        known = sorted(set(BUILTIN) | set(overrides))
        raise UsageError(f"--profile {name!r}: no such profile; known: {', '.join(known)}")
    values = {**dict(BUILTIN.get(name, DEFAULT).values), **dict(overrides.get(name, ()))}
    return Profile(name, tuple(values.items()))

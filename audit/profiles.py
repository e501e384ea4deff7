"""Run profiles for the tool's three uses, built in and overridable in the registry's ``profiles``.

Precedence: a flag given on the command line, then the profile, then the built-in defaults.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from audit.errors import UsageError


@dataclass(frozen=True)
class Profile:
    """The run settings a profile fixes."""

    name: str
    examples: int = 20
    compile_backend: str = "aot_eager"
    cache: bool = False
    timeout: float = 300.0
    strict: bool = False


#: premerge: fast and cached, for every pull request; intake: the defaults, thorough enough for a new
#: model; upgrade: more examples and the real compiler, nothing reused, for accepting a new torch.
BUILTIN = {
    "premerge": Profile("premerge", examples=10, compile_backend="aot_eager", cache=True),
    "intake": Profile("intake", examples=20, compile_backend="aot_eager", cache=False),
    "upgrade": Profile("upgrade", examples=50, compile_backend="inductor", cache=False),
}
DEFAULT = Profile("default")
SETTINGS = tuple(f.name for f in fields(Profile) if f.name != "name")


def profile(name: str | None, registry) -> Profile:
    """The named profile with the registry's overrides applied (the defaults when ``name`` is None)."""
    overrides = dict(registry.profiles)
    if name is None:
        return DEFAULT
    if name not in BUILTIN and name not in overrides:
        known = sorted(set(BUILTIN) | set(overrides))
        raise UsageError(f"--profile {name!r}: no such profile; known: {', '.join(known)}")
    base = BUILTIN.get(name, Profile(name))
    return replace(base, **dict(overrides.get(name, ())))


def settle(given: dict, explicit: set[str], chosen: Profile) -> dict:
    """``given`` option values, with each setting not given explicitly taken from the profile."""
    return {**given, **{key: getattr(chosen, key) for key in SETTINGS if key not in explicit}}

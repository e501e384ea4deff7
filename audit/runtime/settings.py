"""Every setting of an audit run, declared once, and the one rule of which source wins.

A field of :class:`Settings` is a setting: its name, type and default, and in its metadata (:class:`Setting`) its
help, its command-line flag and the places besides the command line that may set it. Everything else derives from
these declarations: ``audit run``'s options (and the same options of the other commands), the keys of
``[tool.autograd-audit]`` in ``pyproject.toml``, the keys of a profile, the keywords of :func:`audit.api.audit`
and the options of the pytest plugin. :func:`settle` decides precedence: a flag over ``pyproject.toml`` over the
profile over the default.
"""

from __future__ import annotations

import functools
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from audit.core.errors import UsageError

#: Where a setting may come from besides the command line (every setting has a flag).
PYPROJECT, PROFILE, API, PLUGIN = "pyproject", "profile", "api", "plugin"
#: The table of ``pyproject.toml`` that holds settings: ``[tool.autograd-audit]``.
SECTION = "autograd-audit"


@dataclass(frozen=True)
class Setting:
    """What a setting declares beyond its name, type and default.

    ``flags``: its command-line spellings (default ``--name-with-dashes``). ``choices``, ``minimum`` (refused
    itself when ``exclusive``), ``path`` (``"file"`` or ``"dir"``; relative to ``pyproject.toml`` when set
    there), ``switch`` (a boolean with a ``--no-`` form), ``count`` (repeated, counted), ``metavar`` and
    ``aliases`` (the report formats' other names) shape the flag. ``sources``: which of :data:`PYPROJECT`,
    :data:`PROFILE`, :data:`API` (a keyword of the Python API) and :data:`PLUGIN` (a pytest option) may also
    set it. ``also``: the other commands whose option of the same name ``pyproject.toml`` sets with it.
    """

    help: str
    flags: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    exclusive: bool = False
    path: str = ""
    switch: bool = False
    count: bool = False
    metavar: str | None = None
    aliases: bool = False
    sources: frozenset[str] = frozenset()
    also: tuple[str, ...] = ()


def setting(default: Any, help: str, *, sources: tuple[str, ...] = (), **shape: Any) -> Any:
    """A :class:`Settings` field: its ``default`` and its declaration (see :class:`Setting`)."""
    return field(default=default, metadata={"setting": Setting(help=help, sources=frozenset(sources), **shape)})


BACKENDS = ("aot_eager", "inductor", "eager")


@dataclass(frozen=True)
class Settings:
    """The settings of one ``audit run``, as a user gives them (sizes as text: ``8G``); the engine's view of
    them is :class:`audit.runtime.options.RunOptions`. Fields in the order ``audit run --help`` lists them."""

    registry: str = setting("registry.yaml", "The registry file.", path="file", sources=(PYPROJECT,),
                            also=("list", "repro"))
    out: str = setting("reports", "Folder for matrix.json, matrix.md and replay scripts.", path="dir",
                       sources=(PYPROJECT,))
    select: tuple[str, ...] = setting((), "Entry names or glob patterns (repeatable).")
    checks: tuple[str, ...] = setting((), "Only these checks (repeatable).", flags=("--check",), sources=(API,))
    devices: tuple[str, ...] = setting((), "Only these devices (repeatable).", flags=("--device",),
                                       choices=("cpu", "cuda", "mps"), sources=(PYPROJECT,))
    examples: int = setting(20, "Examples per claimed cell.", minimum=1, sources=(PYPROJECT, PROFILE, API, PLUGIN),
                            also=("repro",))
    seed: int = setting(0, "The run's seed; recorded in the matrix.", sources=(PYPROJECT, API, PLUGIN),
                        also=("repro",))
    jobs: int = setting(1, "Worker processes.", flags=("-j", "--jobs"), minimum=1, sources=(PYPROJECT, PLUGIN))
    timeout: float = setting(300.0, "Seconds per check before the worker is killed (a worker's start-up, importing "
                                    "torch and the target, has its own budget: the longer of 120 s and this).",
                             minimum=0, exclusive=True, sources=(PYPROJECT, PROFILE))
    unclaimed_timeout: float = setting(30.0, "Seconds per unclaimed cell (never more than --timeout): it cannot "
                                             "fail the gate, so a probe that hangs is not waited for as long as a "
                                             "claimed check.", minimum=0, exclusive=True, sources=(PYPROJECT,))
    max_memory: str = setting("8G", "Memory cap per worker (e.g. 512M, 4G; 0: none).", sources=(PYPROJECT,))
    compile_backend: str = setting("aot_eager", "torch.compile backend of the compile check (aot_eager: Dynamo and "
                                                "AOTAutograd, fast; inductor: the real code generator, slow to "
                                                "compile).", choices=BACKENDS,
                                   sources=(PYPROJECT, PROFILE, API), also=("repro",))
    strict: bool = setting(False, "skip and xpass cells fail the gate too.", sources=(PYPROJECT, PROFILE),
                           also=("merge",))
    fail_unverified: bool = setting(False, "An entry none of whose claimed cells ran to a verdict (every one a skip) "
                                           "fails the gate (--strict does too; without either, every report names "
                                           "it).", switch=True, sources=(PYPROJECT, PROFILE))
    progress: str = setting("auto", "A progress bar on a terminal (auto), a line per entry otherwise.",
                            choices=("auto", "on", "off"), sources=(PYPROJECT,))
    profile: str | None = setting(None, "premerge (10 examples, cache on), intake (the defaults), upgrade (50 "
                                        "examples, inductor, no cache), or one from the registry's profiles; "
                                        "flags given here win.", sources=(PYPROJECT,))
    record: bool = setting(False, "Also record each entry's behaviour on fixed cases (outputs, gradients, training, "
                                  "checkpoints, cost) in OUT/behaviour, for audit diff to compare across "
                                  "environments.", switch=True, sources=(PYPROJECT, PROFILE))
    against: str | None = setting(None, "With --record: an earlier run's reports folder whose modules' and models' "
                                        "checkpoints are loaded here (strictly) and their outputs recorded, for audit "
                                        "diff to compare.", path="dir", metavar="OLD_OUT")
    cache: bool = setting(False, "Reuse cells whose spec, code, check, torch, Python, device, seed and examples are "
                                 "unchanged.", switch=True, sources=(PYPROJECT, PROFILE))
    cache_dir: str | None = setting(None, "Where cached cells live (default: .audit-cache beside the registry).",
                                    path="dir", sources=(PYPROJECT,))
    cache_size: str = setting("512M", "Bound on the cache; least recently used go.", sources=(PYPROJECT,))
    shard: str | None = setting(None, "Audit only the K-th of N deterministic shards of the entries (merge the "
                                      "shards with audit merge).", metavar="K/N")
    durations: str | None = setting(None, "An earlier matrix whose recorded seconds balance the shards (else: by "
                                          "entry count).", path="file")
    output_format: str = setting("text", "text (alias terminal): the report; github: error annotations at each "
                                         "failing entry's registry line before it, and a job summary when "
                                         "$GITHUB_STEP_SUMMARY is set; json: the matrix on stdout; sarif: SARIF "
                                         "2.1.0 on stdout (code scanning).", flags=("--format",),
                                 choices=("text", "github", "json", "sarif"), aliases=True)
    verbosity: int = setting(0, "-v: also every skip, unsupported, waived and xpass cell with its reason.",
                             flags=("-v", "--verbose"), count=True)
    quiet: bool = setting(False, "Only the failures and the verdict (no table, no progress).", flags=("-q", "--quiet"))
    owner: str | None = setting(None, "This owner's causes of failure first in every report it writes and shows "
                                      "(@vision).", metavar="OWNER")


@dataclass(frozen=True)
class Declared:
    """One setting as its consumers read it: name, type (``int``, ``str | None``, ``tuple[str, ...]``...),
    default and declaration."""

    name: str
    type: Any
    default: Any
    setting: Setting

    @property
    def flag(self) -> str:
        """Its long command-line flag (``--max-memory``)."""
        return next((f for f in self.setting.flags if f.startswith("--")), "--" + self.name.replace("_", "-"))

    @property
    def repeated(self) -> bool:
        """Whether it takes many values (a flag given again adds one)."""
        return typing.get_origin(self.type) is tuple


@functools.cache
def declared(cls: type = Settings) -> tuple[Declared, ...]:
    """Every setting of ``cls`` (:class:`Settings`, or one extending it), in field order."""
    hints = typing.get_type_hints(cls)
    return tuple(Declared(f.name, hints[f.name], f.default, f.metadata["setting"]) for f in fields(cls))


def flag(name: str, cls: type = Settings) -> str:
    """The long command-line flag of the setting ``name`` (``--max-memory``)."""
    return next(d.flag for d in declared(cls) if d.name == name)


def settable(source: str, cls: type = Settings) -> tuple[str, ...]:
    """The settings ``source`` (:data:`PYPROJECT`, :data:`PROFILE`, :data:`API`, :data:`PLUGIN`) may set."""
    return tuple(d.name for d in declared(cls) if source in d.setting.sources)


#: How a source that may not set a key refuses it: in the words of the registry's schema for a profile.
REFUSALS = {PYPROJECT: f"{{where}}[tool.{SECTION}] unknown key {{key!r}}; expected one of: {{allowed}}",
            PROFILE: "{where}.{key}: unknown key; expected one of: {allowed}"}
_NONE: Mapping[str, Any] = {}


def settle(flags: Mapping[str, Any] = _NONE, pyproject: Mapping[str, Any] = _NONE, profile: Mapping[str, Any] = _NONE,
           *, profile_name: str = "NAME", cls: type[Settings] = Settings) -> Settings:
    """The run's settings: each from the first of ``flags`` (the command line, its environment variables, the API's
    keywords), ``pyproject`` (``[tool.autograd-audit]``) and ``profile`` that gives it, else its default. A tier
    gives only what it names: leave a setting out to fall through to the next. A key the profile (or the file) may
    not set is refused, in the words the registry's schema refuses it with."""
    refuse(profile, PROFILE, where=f"profiles.{profile_name}", cls=cls)
    refuse(pyproject, PYPROJECT, cls=cls)
    return cls(**{**profile, **pyproject, **flags})


def refuse(keys: Iterable[str], source: str, *, where: str = "", cls: type[Settings] = Settings) -> None:
    """Raise :class:`UsageError` for the first of ``keys`` that ``source`` may not set; ``where`` leads the message
    (the file, the profile's path)."""
    allowed = settable(source, cls)
    unknown = sorted(set(keys) - set(allowed))
    if unknown:
        listed = sorted(allowed) if source == PROFILE else allowed
        raise UsageError(REFUSALS[source].format(where=where, key=unknown[0], allowed=", ".join(listed)))


def parse_size(text: str, option: str = "--max-memory") -> int:
    """``"512M"``, ``"4G"``, ``"1024"`` (bytes) or ``"0"`` (no cap) to bytes."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*", text, re.IGNORECASE)
    if not match:
        raise UsageError(f"{option}: expected a size like 512M or 4G, got {text!r}")
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[match.group(2).upper()]
    return int(float(match.group(1)) * scale)

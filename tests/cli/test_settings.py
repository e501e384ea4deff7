"""One source for the run settings: the precedence of their tiers, and every surface derived from the declarations
(the command line, pyproject.toml, profiles, the Python API, the pytest plugin, the engine's options)."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, fields
from importlib import resources

import click
import pytest

from audit import api
from audit.app import config, profiles
from audit.cli import cli, setting_options
from audit.core.errors import UsageError
from audit.pytest_plugin import pytest_addoption
from audit.runtime.options import RunOptions
from audit.runtime.settings import (API, PLUGIN, PROFILE, PYPROJECT, Settings, declared, parse_size, settable, setting,
                                    settle)


@dataclass(frozen=True)
class Extended(Settings):
    """The settings with one more, declared like the others: every surface must pick it up."""

    frobs: int = setting(3, "Frobs per cell.", minimum=1, sources=(PYPROJECT, PROFILE, API, PLUGIN))


# The precedence: a flag over pyproject.toml over the profile over the default.

def test_each_tier_beats_the_one_below():
    assert settle().examples == 20
    assert settle(profile={"examples": 5}).examples == 5
    assert settle(pyproject={"examples": 4}, profile={"examples": 5}).examples == 4
    assert settle(flags={"examples": 3}, pyproject={"examples": 4}, profile={"examples": 5}).examples == 3


def test_a_tier_that_leaves_a_setting_out_falls_through_to_the_next():
    settled = settle(flags={"seed": 7}, pyproject={"examples": 4, "jobs": 2}, profile={"examples": 5, "cache": True})
    assert (settled.seed, settled.examples, settled.jobs, settled.cache, settled.timeout) == (7, 4, 2, True, 300.0)


def test_a_key_a_profile_may_not_set_is_refused_as_the_schema_refuses_it():
    with pytest.raises(UsageError, match=r"^profiles\.fast\.jobs: unknown key; expected one of: cache, "
                                         r"compile_backend, examples, fail_unverified, record, strict, timeout$"):
        settle(profile={"jobs": 2}, profile_name="fast")


def test_a_key_pyproject_may_not_set_is_refused():
    with pytest.raises(UsageError, match=r"^\[tool.autograd-audit\] unknown key 'select'; expected one of: registry"):
        settle(pyproject={"select": ("a",)})


def test_the_schema_offers_a_profile_exactly_the_settings_a_profile_may_set():
    schema = json.loads(resources.files("audit.schema").joinpath("registry.schema.json").read_text())
    keys = schema["properties"]["profiles"]["additionalProperties"]["properties"]
    assert sorted(keys) == sorted(settable(PROFILE))
    for found in declared():
        if found.name in keys and found.setting.choices:
            assert keys[found.name]["enum"] == list(found.setting.choices)


def test_a_registry_profile_overrides_a_builtin_one_and_keeps_the_rest():
    class Registry:
        profiles = (("premerge", (("examples", 3),)), ("nightly", (("examples", 7),)))

    premerge = settle(profile=dict(profiles.profile("premerge", Registry).values))
    assert (premerge.examples, premerge.cache) == (3, True)
    assert settle(profile=dict(profiles.profile("nightly", Registry).values)).examples == 7
    assert profiles.profile(None, Registry) == profiles.DEFAULT and not profiles.DEFAULT.values


# Every surface is derived from the declarations.

def test_audit_run_has_an_option_for_every_setting_and_nothing_else():
    assert [p.name for p in cli.commands["run"].params] == [f.name for f in fields(Settings)]


def test_a_new_setting_becomes_a_flag_a_pyproject_key_a_profile_key_an_api_keyword_and_a_plugin_option():
    command = click.command()(setting_options(Extended)(lambda **options: None))
    frobs = next(p for p in command.params if p.name == "frobs")
    assert frobs.opts == ["--frobs"] and frobs.default == 3 and frobs.help == "Frobs per cell."
    for source in (PYPROJECT, PROFILE, API, PLUGIN):
        assert "frobs" in settable(source, Extended)
    assert settle(profile={"frobs": 2}, cls=Extended).frobs == 2


def test_the_pyproject_keys_are_the_settings_pyproject_may_set():
    assert list(config.KEYS) == list(settable(PYPROJECT))
    assert {key for key, (_, is_path) in config.KEYS.items() if is_path} == {"registry", "out", "cache_dir"}
    assert config.ROOTED_DEFAULTS == {"registry": "registry.yaml", "out": "reports"}


def test_the_api_takes_each_setting_declared_for_it_as_a_keyword_at_its_default():
    parameters = inspect.signature(api.audit).parameters
    for name in settable(API):
        assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY
        assert parameters[name].default == getattr(Settings(), name)
    assert api.keywords() == settable(API) == ("checks", "examples", "seed", "compile_backend")


def test_the_plugin_has_an_option_for_each_setting_declared_for_it():
    added = []

    class Group:
        def addoption(self, *names, **options):
            added.append(names[0])

    class Parser:
        def getgroup(self, name):
            return Group()

    pytest_addoption(Parser())
    assert added == ["--audit-registry"] + [f"--audit-{name}" for name in settable(PLUGIN)]


def test_the_engines_defaults_are_the_settings_defaults():
    assert RunOptions() == RunOptions.of(Settings())
    settled = RunOptions.of(settle(flags={"max_memory": "1G", "cache": True}), base="/r")
    assert settled.max_memory == 1 << 30 and settled.cache_dir == "/r/.audit-cache"


def test_a_bad_size_names_its_flag():
    with pytest.raises(UsageError, match=r"^--cache-size: expected a size like 512M or 4G, got 'big'$"):
        RunOptions.of(settle(flags={"cache_size": "big"}))
    assert parse_size("0") == 0 and parse_size("512M") == 512 << 20

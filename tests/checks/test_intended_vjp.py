"""Intended gradients that are a rule of their own (tests/fixtures/intended_vjp.py): guided backpropagation, a lower
bound that passes the gradient toward it, LSQ's learned step size. With ``vjp:`` the gradient checks compare the
target's VJPs with the declared VJP's, in float64 on the same values, on random, all-zero and non-contiguous
cotangents, never with finite differences of the forward; a declared VJP that raises or returns the wrong count or
shapes is an error naming it; ``proxy`` and ``vjp`` together are a registry error."""

from __future__ import annotations

import pytest
import yaml
from click.testing import CliRunner

from audit.cli import cli
from audit.core.errors import AuditError
from audit.kit.proxy import INTENDED
from audit.results.outcome import ERRORED, HELD, SKIPPED, VIOLATED
from tests.helpers import entry, observe
from tests.replay.intended_vjp import BOUND, GUIDED, LSQ, ROWS

V = "tests.fixtures.intended_vjp"
TWINS = [(f"{V}:GuidedReLU", GUIDED), (f"{V}:LowerBound", BOUND), (f"{V}:LSQ", LSQ)]


def _spec(tmp_path, target: str, spec: dict):
    return entry(tmp_path, target=target, **spec)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_a_planted_bug_fails_against_its_declared_vjp_and_its_twin_holds(tmp_path, row):
    found = observe(_spec(tmp_path, row.bug, row.spec), row.check, row.dtype)
    assert found.verdict == VIOLATED, found.message
    assert row.words in found.message, found.message
    assert f"against the declared VJP {row.spec['vjp']}" in found.message, found.message
    assert found.kind.startswith(INTENDED), found.kind
    twin = observe(_spec(tmp_path, row.twin, row.spec), row.check, row.dtype)
    assert twin.verdict == HELD, twin.message


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("check", ["gradcheck", "dtype"])
@pytest.mark.parametrize("twin, spec", TWINS, ids=[t[0].rsplit(":", 1)[1] for t in TWINS])
def test_every_correct_twin_holds_against_its_declared_vjp(tmp_path, twin, spec, check, dtype):
    found = observe(_spec(tmp_path, twin, spec), check, dtype)
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("bug, spec", [(f"{V}:GuidedReLUNegative", GUIDED), (f"{V}:LowerBoundInverted", BOUND),
                                       (f"{V}:LSQUnscaled", LSQ)], ids=["guided", "bound", "lsq"])
def test_every_planted_bug_fails_both_gradient_checks_in_both_dtypes(tmp_path, bug, spec):
    for check in ("gradcheck", "dtype"):
        for dtype in ("float64", "float32"):
            found = observe(_spec(tmp_path, bug, spec), check, dtype)
            assert found.verdict == VIOLATED, f"{check} {dtype}: {found.message}"
            assert spec["vjp"] in found.message and "declared VJP" in found.message, found.message


def test_with_a_declared_vjp_finite_differences_of_the_forward_are_never_taken(tmp_path, monkeypatch):
    import torch

    def refused(*args, **kwargs):
        raise AssertionError("finite differences of the forward were taken")

    monkeypatch.setattr(torch.autograd, "gradcheck", refused)
    for check in ("gradcheck", "dtype"):
        found = observe(_spec(tmp_path, f"{V}:GuidedReLU", GUIDED), check)
        assert found.verdict == HELD, found.message


@pytest.mark.parametrize("broken, words", [
    ("raising_vjp", "the declared VJP {name} raised ValueError: this VJP is broken"),
    ("two_gradients_vjp", "the declared VJP {name} returned 2 gradients for 1 arguments"),
    ("wrong_shape_vjp", "the declared VJP {name} returned [] as the gradient of argument 0"),
], ids=["raises", "count", "shape"])
@pytest.mark.parametrize("check", ["gradcheck", "dtype"])
def test_a_broken_declared_vjp_is_an_error_naming_it(tmp_path, broken, words, check):
    name = f"{V}:{broken}"
    found = observe(_spec(tmp_path, f"{V}:GuidedReLU", {**GUIDED, "vjp": name}), check)
    assert found.verdict == ERRORED, found.message
    assert words.format(name=name) in found.message, found.message
    assert f"the entry's declared VJP {name}, not the target" in found.message, found.message


@pytest.mark.parametrize("check", ["forward_ad", "gradgradcheck"])
def test_a_check_the_declared_vjp_defines_nothing_for_is_a_skip_saying_why(tmp_path, check):
    spec = {**GUIDED, "supports": {"forward_ad": True, "double_backward": True}}
    found = observe(_spec(tmp_path, f"{V}:GuidedReLU", spec), check)
    assert found.verdict == SKIPPED and f"vjp: {V}:guided_relu_vjp" in found.message, found.message


def test_proxy_and_vjp_together_are_a_registry_error(tmp_path):
    spec = {**GUIDED, "proxy": "torch:relu"}
    with pytest.raises(AuditError, match="expected proxy or vjp, not both"):
        entry(tmp_path, target=f"{V}:GuidedReLU", **spec)
    registry = tmp_path / "registry.yaml"
    registry.write_text(yaml.safe_dump({"version": 1, "entries": [
        {"name": "guided", "owner": "@tests", "kind": "function", "target": f"{V}:GuidedReLU", **spec}]},
        sort_keys=False))
    result = CliRunner().invoke(cli, ["validate", str(registry)])
    assert result.exit_code == 2, result.output
    assert "registry.yaml:" in result.output and "entries[0].vjp" in result.output, result.output
    assert "expected proxy or vjp, not both" in result.output, result.output


def test_the_registry_refuses_a_vjp_for_a_model(tmp_path):
    with pytest.raises(AuditError, match="expected no vjp for kind model"):
        entry(tmp_path, target=f"{V}:GuidedReLU", kind="model", vjp=f"{V}:guided_relu_vjp")


def test_a_gradient_off_its_declared_vjp_gets_the_intended_gradient_fix(tmp_path):
    from audit.reporters.causes import builtin_fixes
    from audit.results.causes import identity

    found = observe(_spec(tmp_path, f"{V}:LSQUnscaled", LSQ), "gradcheck")
    assert found.verdict == VIOLATED and found.kind.startswith(f"{INTENDED}gradient of input"), found.kind
    _, kind, _ = identity("gradcheck", found.kind, found.message, ())
    fix = builtin_fixes()[("gradcheck", kind)]
    assert "VJP" in fix and "derive it again from the forward" not in fix, fix


@pytest.mark.parametrize("dtypes, dtype", [(["float32"], "float32"), (["bfloat16"], "bfloat16")],
                         ids=["float32-alone", "bfloat16"])
@pytest.mark.parametrize("twin, bug, spec", [(f"{V}:GuidedReLU", f"{V}:GuidedReLUNegative", GUIDED),
                                             (f"{V}:LSQ", f"{V}:LSQUnscaled", LSQ)], ids=["guided", "lsq"])
def test_judged_by_its_own_error_the_declared_vjp_holds_the_twin_and_fails_the_bug(tmp_path, twin, bug, spec,
                                                                                   dtypes, dtype):
    claimed = {**spec, "supports": {"dtypes": dtypes}}
    for check in ("gradcheck", "dtype"):
        held = observe(_spec(tmp_path, twin, claimed), check, dtype)
        assert held.verdict == HELD, f"{check}: {held.message}"
        found = observe(_spec(tmp_path, bug, claimed), check, dtype)
        assert found.verdict == VIOLATED, f"{check}: {found.message}"
        assert f"the declared VJP itself makes in {dtype}" in found.message, found.message


def test_vmap_compares_a_declared_vjps_jacobian_with_eager_not_finite_differences(tmp_path):
    # jacrev of LSQ's intended backward is not the forward's derivative (a step function's: zero inside a bin)
    found = observe(_spec(tmp_path, f"{V}:LSQFunctional", {**LSQ, "supports": {"vmap": True}}), "vmap", examples=5)
    assert found.verdict == HELD, found.message

"""Intended gradients (tests/fixtures/intended.py): a backward that is deliberately not the derivative of its forward
(a surrogate spike, a straight-through estimator, a gradient reversal) is judged against the declared proxy's
autograd gradient, never by finite differences of the forward; a broken proxy is an error naming it; a module is held
to its proxy in train() and eval(); a Function that only .backward() runs is audited through .backward()."""

from __future__ import annotations

import pytest

from audit.checks import builtin
from audit.engine.plan import claimed, plan
from audit.results.outcome import ERRORED, HELD, SKIPPED, VIOLATED
from tests.helpers import entry, observe
from tests.replay.intended import LAYER, REVERSIBLE, ROWS, SPIKE, STE

F = "tests.fixtures.intended"


def _spec(tmp_path, target: str, spec: dict):
    return entry(tmp_path, target=target, **spec)


@pytest.mark.parametrize("row", ROWS, ids=[row.id for row in ROWS])
def test_a_planted_intended_gradient_bug_fails_and_its_twin_holds(tmp_path, row):
    found = observe(_spec(tmp_path, row.bug, row.spec), row.check, row.dtype)
    assert found.verdict == VIOLATED, found.message
    assert row.words in found.message, found.message
    if row.spec.get("proxy") and row.check not in ("compile",):
        assert row.spec["proxy"] in found.message or "Jacobian" in found.message, "the message names the proxy"
    twin = observe(_spec(tmp_path, row.twin, row.spec), row.check, row.dtype)
    assert twin.verdict == HELD, twin.message


TWINS = sorted({(row.twin, row.id) for row in ROWS if row.spec.get("proxy")}, key=lambda t: t[1])


@pytest.mark.parametrize("twin, row_id", TWINS, ids=[t[1] for t in TWINS])
def test_a_correct_intended_gradient_holds_every_claimed_cell(tmp_path, twin, row_id):
    row = next(r for r in ROWS if r.id == row_id)
    subject = _spec(tmp_path, twin, row.spec)
    checks = builtin()
    for key in plan(subject, checks):
        if checks[key.check].resource or key.check in ("compile", "export"):  # slow: their rows cover them
            continue
        found = observe(subject, key.check, key.dtype, examples=5, claimed=claimed(subject, checks[key.check], key))
        if claimed(subject, checks[key.check], key):
            assert found.verdict not in (VIOLATED, ERRORED), f"{key}: {found.message}"


def test_without_a_proxy_a_surrogate_fails_finite_differences_as_before(tmp_path):
    # the reason for the claim: the spike's true derivative is zero, its surrogate is not
    spec = {key: value for key, value in SPIKE.items() if key != "proxy"}
    found = observe(_spec(tmp_path, f"{F}:ArctanSpike", spec), "gradcheck")
    assert found.verdict == VIOLATED and "numeric 0" in found.message, found.message


def test_with_a_proxy_finite_differences_of_the_forward_are_never_taken(tmp_path, monkeypatch):
    import torch

    original, differenced = torch.autograd.gradcheck, []

    def watched(fn, inputs, **kwargs):  # the proxy's own check is allowed; the spike's steps are 0 or 1
        differenced.append(bool(torch.isin(fn(*inputs), torch.tensor([0.0, 1.0], dtype=torch.float64)).all()))
        return original(fn, inputs, **kwargs)

    monkeypatch.setattr(torch.autograd, "gradcheck", watched)
    assert observe(_spec(tmp_path, f"{F}:ArctanSpike", SPIKE), "gradcheck").verdict == HELD
    assert differenced and not any(differenced), "finite differences of the step itself were taken"


def test_a_proxy_that_raises_is_an_error_naming_the_proxy(tmp_path):
    found = observe(_spec(tmp_path, f"{F}:ArctanSpike", {**SPIKE, "proxy": f"{F}:raising_proxy"}), "gradcheck")
    assert found.verdict == ERRORED, found.message
    assert "the proxy raised ValueError" in found.message and f"{F}:raising_proxy" in found.message, found.message
    assert "not the target" in found.message


def test_a_proxy_whose_gradient_is_not_its_derivative_is_an_error(tmp_path):
    found = observe(_spec(tmp_path, f"{F}:RoundSTE", {**STE, "proxy": f"{F}:straight_through_proxy"}), "gradcheck")
    assert found.verdict == ERRORED, found.message
    assert "disagrees with its finite differences" in found.message, found.message


def test_a_module_is_held_to_its_proxy_in_each_mode_it_declares(tmp_path):
    spec = {**SPIKE, "kind": "module"}
    both = observe(_spec(tmp_path, f"{F}:spiking_layer_eval_step", spec), "gradcheck")
    assert both.verdict == VIOLATED and "eval()" in both.message, both.message
    train_only = observe(_spec(tmp_path, f"{F}:spiking_layer_eval_step", {**spec, "proxy_modes": ["train"]}),
                         "gradcheck")
    assert train_only.verdict == HELD, train_only.message


def test_a_transform_that_bypasses_the_surrogate_says_so(tmp_path):
    found = observe(_spec(tmp_path, f"{F}:arctan_spike_bypassed",
                          {**SPIKE, "kind": "callable", "supports": {"compile": True}}), "compile", examples=3)
    assert found.verdict == VIOLATED, found.message
    assert "the custom backward did not run" in found.message and f"{F}:arctan_primitive" in found.message


@pytest.mark.parametrize("declared", [False, True], ids=["detected", "declared"])
@pytest.mark.parametrize("check", ["gradcheck", "noncontiguous", "partial_grad", "dtype"])
def test_a_function_that_only_backward_runs_audits_without_a_false_alarm(tmp_path, check, declared):
    spec = {**REVERSIBLE, "backward_only": True} if declared else REVERSIBLE
    found = observe(_spec(tmp_path, f"{F}:ReversibleScale", spec), check, "float32" if check == "dtype" else
                    "float64")
    assert found.verdict == HELD, found.message
    if not declared and check != "partial_grad":  # partial_grad takes its gradients through .backward() already
        assert "detected" in found.details["backward_only"], found.details


def test_a_function_that_allows_one_backward_per_forward_audits_through_backward(tmp_path):
    found = observe(_spec(tmp_path, f"{F}:OneBackward", REVERSIBLE), "gradcheck")
    assert found.verdict == HELD, found.message


@pytest.mark.parametrize("declared", [False, True], ids=["detected", "declared"])
def test_a_backward_only_module_is_held_to_its_parameter_gradients(tmp_path, declared):
    spec = {**LAYER, "backward_only": declared}
    assert observe(_spec(tmp_path, f"{F}:reversible_layer", spec), "gradcheck").verdict == HELD
    found = observe(_spec(tmp_path, f"{F}:reversible_layer_wrong", spec), "gradcheck")
    assert found.verdict == VIOLATED and "gradient of parameter 'w'" in found.message, found.message


def test_a_check_that_builds_its_own_modules_skips_a_backward_only_module_saying_why(tmp_path):
    found = observe(_spec(tmp_path, f"{F}:reversible_layer", LAYER), "state_dict")
    assert found.verdict in (SKIPPED, HELD), found.message
    if found.verdict == SKIPPED:
        assert "refuses torch.autograd.grad" in found.message, found.message


def test_reentrant_checkpointing_audits_through_backward(tmp_path):
    spec = {**REVERSIBLE, "kind": "callable", "reference": f"{F}:block_reference"}
    found = observe(_spec(tmp_path, f"{F}:checkpointed", spec), "gradcheck")
    assert found.verdict == HELD, found.message
    assert "torch.utils.checkpoint is incompatible with .grad()" in found.details["backward_only"]


def test_second_order_is_a_skip_saying_why_for_a_backward_only_function(tmp_path):
    spec = {**REVERSIBLE, "backward_only": True, "supports": {"double_backward": True, "forward_ad": True}}
    for check in ("gradgradcheck", "forward_ad"):
        found = observe(_spec(tmp_path, f"{F}:ReversibleScale", spec), check)
        assert found.verdict == SKIPPED and "backward_only" in found.message, found.message


def test_the_registry_refuses_proxy_modes_where_they_mean_nothing(tmp_path):
    from audit.core.errors import AuditError

    with pytest.raises(AuditError, match="proxy_modes"):
        entry(tmp_path, target=f"{F}:ArctanSpike", **{**SPIKE, "proxy_modes": ["train"]})
    with pytest.raises(AuditError, match="proxy_modes"):
        entry(tmp_path, target=f"{F}:ArctanSpike", **{**SPIKE, "proxy_modes": ["sleep"]})


def test_a_gradient_off_its_proxy_is_not_the_intended_gradient_and_its_fix_follows_the_declarations(tmp_path):
    from audit.reporters.causes import builtin_fixes
    from audit.results.causes import identity

    found = observe(_spec(tmp_path, f"{F}:ArctanSpikeSlope", SPIKE), "gradcheck")
    assert found.verdict == VIOLATED and found.kind.startswith("not the intended gradient: gradient of input")
    _, kind, _ = identity("gradcheck", found.kind, found.message, ())
    fix = builtin_fixes()[("gradcheck", kind)]
    assert "proxy" in fix and "derive it again from the forward" not in fix


def test_in_half_precision_the_allowance_against_a_proxy_names_the_proxy(tmp_path):
    import torch

    from audit.kit.precision import own_error_mismatch

    truth = torch.tensor([1.0, 2.0], dtype=torch.float64)
    said = own_error_mismatch(truth + 0.5, truth, truth.half().double(), torch.float16, against="the proxy")
    assert said and "the proxy's error in float16" in said and "reference" not in said


def test_in_dtype_too_a_gradient_off_its_proxy_is_not_the_intended_gradient(tmp_path):
    found = observe(_spec(tmp_path, f"{F}:ArctanSpikeSlope", SPIKE), "dtype")
    assert found.verdict == VIOLATED and found.kind.startswith("not the intended gradient: "), found.kind

"""Messages never blame what the entry does not have, nor quote the audit's own files: a float32 cell whose float64
run raises (no reference: the wider run is the target's own) says the target raised in float64; a backward that
raises whatever its gradients is the target's exception, in undefined_grad as everywhere."""

from __future__ import annotations

from audit.results.outcome import VIOLATED
from tests.helpers import entry, observe


def test_without_a_reference_the_wider_runs_exception_is_the_targets_in_that_dtype(tmp_path):
    subject = entry(tmp_path, kind="callable", target="tests.fixtures.broken:float32_weights",
                    inputs=[{"shape": ["N", 3]}])
    found = observe(subject, "dtype", "float32")
    assert found.verdict == VIOLATED
    assert found.message.startswith("the target raised RuntimeError in float64: "), found.message
    assert "reference" not in found.message and "audit/" not in found.message
    assert "tests/fixtures/broken.py" in found.message  # quoted from the target's own frame


def test_a_backward_that_always_raises_is_not_about_undefined_gradients(tmp_path):
    subject = entry(tmp_path, target="tests.fixtures.broken:TwoOutputsBackwardRaises", inputs=[{"shape": ["N"]}])
    found = observe(subject, "undefined_grad")
    assert found.verdict == VIOLATED
    assert "this backward always raises" in found.message and "tests/fixtures/broken.py" in found.message
    assert "None grad_outputs" not in found.message

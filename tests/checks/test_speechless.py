"""A target whose exceptions carry no message is reported as such, never as the audit's own IndexError."""

from __future__ import annotations

import pytest

from audit.results.outcome import VIOLATED
from tests.helpers import entry, observe

SPEC = {"target": "tests.fixtures.hostile:Speechless", "inputs": [{"shape": ["B", "N"]}],
        "dims": {"B": [1, 2], "N": [1, 3]}, "supports": {"forward_ad": True, "autocast": True, "noncontiguous": True}}


@pytest.mark.parametrize("check, target", [("gradcheck", "Speechless"), ("forward_ad", "Speechless"),
                                           ("undefined_grad", "Speechless"), ("noncontiguous", "SpeechlessOnLayout")])
def test_an_exception_without_a_message_is_reported_not_crashed_on(tmp_path, check, target):
    spec = {**SPEC, "target": f"tests.fixtures.hostile:{target}"}
    found = observe(entry(tmp_path, **spec), check, examples=10)
    assert found.verdict == VIOLATED, found.message
    assert "IndexError" not in found.message and "list index out of range" not in found.message, found.message
    assert any(w in found.message for w in ("RuntimeError", "NotImplementedError", "(no message)")), found.message

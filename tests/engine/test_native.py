"""Native operators: built from C++ sources into a cache, audited like Python ops, contained when they crash."""

from __future__ import annotations

import pytest

from audit.results.outcome import HELD, VIOLATED
from audit.runtime import native
from audit.runtime.target import _digest
from tests.conftest import ROOT
from tests.helpers import entry, observe, run_native

PLANTED = "tests/fixtures/csrc/planted.cpp"
OP = {"kind": "op", "load": [PLANTED], "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 3], "N": [1, 3]},
      "supports": {"compile": True}}
pytestmark = pytest.mark.slow  # the first test builds the extension (about 20 s), the rest reuse it

# (planted op, check, words the message must contain); the correct twin is audit_planted::square.
CASES = [
    ("wrong_backward", "gradcheck", "(analytic 3, numeric 2)"),
    ("strideless", "noncontiguous", "with non-contiguous inputs"),
    ("no_fake", "opcheck", "test_faketensor failed: UnsupportedOperatorException"),
    # Without a fake kernel the op breaks the graph: compile: true still holds (eager's results), fullgraph not.
    ("no_fake", "compile", "Operator does not support running with fake tensors"),
]
CLAIMS = {"compile": {"supports": {"compile": "fullgraph"}}}


@pytest.mark.parametrize("op, check, words", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_planted_native_bug_fails_its_check_and_the_twin_passes(tmp_path, op, check, words):
    spec = {**OP, **CLAIMS.get(check, {})}
    found = observe(entry(tmp_path, target=f"audit_planted::{op}", **spec), check)
    assert found.verdict == VIOLATED and words in found.message, found.message
    twin = observe(entry(tmp_path, target="audit_planted::square", **spec), check)
    assert twin.verdict == HELD, twin.message


def test_the_build_is_cached_and_reused():
    first = native.build([ROOT / PLANTED], with_cuda=False, base=ROOT)
    library = next(first.glob("*.so"))
    stamp = library.stat().st_mtime_ns
    again = native.build([ROOT / PLANTED], with_cuda=False, base=ROOT)
    assert again == first and library.stat().st_mtime_ns == stamp
    assert (first / "build.log").read_text().startswith("built ")


def test_cuda_sources_are_left_out_with_the_reason_where_cuda_is_not():
    loaded = native.load(["examples/csrc/softsign.cpp", "examples/csrc/softsign.cu"], ROOT)
    if native.cuda_missing():
        assert "softsign.cu" in loaded.unbuilt["cuda"] and native.cuda_missing() in loaded.unbuilt["cuda"]
    else:
        assert not loaded.unbuilt
    assert {p.name for p in loaded.files} == {"softsign.cpp", "softsign.cu"}


def test_the_digest_covers_native_sources(tmp_path):
    source = tmp_path / "k.cpp"
    source.write_text("// v1\n")
    spec = entry(tmp_path, target="audit_planted::square", **OP)
    before = _digest(spec, object(), [source])
    source.write_text("// v2\n")
    assert _digest(spec, object(), [source]) != before


def test_a_crash_or_a_failed_build_is_an_error_cell_and_the_rest_survives(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    entries = [
        {"name": "square", "kind": "op", "target": "audit_planted::square", "load": [PLANTED],
         "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
        {"name": "aborts", "kind": "op", "target": "audit_planted::aborts", "load": [PLANTED],
         "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
        {"name": "broken_build", "kind": "op", "target": "audit_broken_build::oops",
         "load": ["tests/fixtures/csrc/broken.cpp"], "inputs": [{"shape": ["B"]}], "dims": {"B": [1, 3]}},
    ]
    result, cells = run_native(tmp_path, "native", entries)
    assert result.exit_code == 1
    assert cells["square", "forward"]["status"] == "pass" and cells["square", "gradcheck"]["status"] == "pass"
    crash = cells["aborts", "forward"]
    assert crash["status"] == "error"
    assert "killed by SIGABRT during forward (float64, cpu) on example" in crash["message"]
    assert crash["kind"] == "error: worker died"
    build = cells["broken_build", "forward"]
    assert build["status"] == "error" and "building broken.cpp failed" in build["message"]
    assert build["kind"] == "error: target could not be loaded"
    assert "error: expected" in build["message"] and "build.log" in build["message"]


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(),
                    reason="needs CUDA: torch.cuda.is_available() is False")
def test_the_cuda_kernel_builds_and_audits_on_a_gpu(tmp_path):
    spec = {"kind": "op", "load": ["examples/csrc/softsign.cpp", "examples/csrc/softsign.cu"],
            "inputs": [{"shape": ["B", "N"]}], "dims": {"B": [1, 3], "N": [1, 64]}, "supports": {"devices": ["cuda"]}}
    subject = entry(tmp_path, target="examples_native::softsign", **spec)
    for check in ("forward", "gradcheck", "device", "noncontiguous"):
        found = observe(subject, check, device="cuda")
        assert found.verdict == HELD, (check, found.message)

"""bench/run.py: a section measured again replaces its own text, and every other is kept as the file has it."""

from __future__ import annotations

import pytest

from bench import run


def _bodies() -> dict[str, str]:
    return {section.key: f"Measured then.\n\n| {section.key} | 1 |\n" for section in run.SECTIONS}


def test_a_written_file_gives_back_every_section_s_text():
    bodies = _bodies()
    assert run.kept_sections(run.document(bodies)) == bodies


def test_only_the_chosen_sections_are_measured_again(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "RESULTS", tmp_path / "results.md")
    run.RESULTS.write_text(run.document(_bodies()))
    monkeypatch.setitem(run.MEASUREMENTS, "jit", lambda work: {"runs": [(1.0, 2, 0), (0.5, 0, 0), (0.5, 0, 0)]})
    monkeypatch.setattr(run, "commit", lambda: "abc1234")
    assert run.main(["--only", "jit"]) == 0
    after = run.kept_sections(run.RESULTS.read_text())
    assert after["jit"].startswith("Measured ") and "at abc1234" in after["jit"]
    assert "| first run (cold) | 1.00 | 2 | 0 |" in after["jit"]
    assert {k: v for k, v in after.items() if k != "jit"} == {k: v for k, v in _bodies().items() if k != "jit"}


def test_a_section_the_file_lacks_must_be_measured(tmp_path, monkeypatch):
    monkeypatch.setattr(run, "RESULTS", tmp_path / "results.md")
    with pytest.raises(SystemExit, match="no section"):
        run.main(["--only", "jit"])

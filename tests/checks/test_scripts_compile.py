"""Every check's replay script body is valid Python on every supported interpreter (a syntax error there
would leave a failure without a replay; the replay test only reaches checks with a planted bug)."""

from __future__ import annotations

import pytest

from audit.checks import builtin

BODIES = [(name, field) for name, check in builtin().items() for field in ("script", "model_script")
          if getattr(check, field)]


@pytest.mark.parametrize("name, field", BODIES, ids=[f"{n}-{f}" for n, f in BODIES])
def test_the_script_body_compiles(name, field):
    compile(getattr(builtin()[name], field), f"<{name} {field}>", "exec")

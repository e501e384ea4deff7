"""Every built-in check is proven on a planted bug: at least one replay row (``tests/replay``) plants a bug the check
must catch and names the correct twin it must pass (``tests/test_replay.py`` runs them). A check added without
one is caught here, not after the fact."""

from __future__ import annotations

from audit.checks import builtin_names
from tests.replay import rows


def test_every_builtin_check_has_a_planted_bug_and_a_twin():
    planted = {row.check for row in rows() if row.bug and row.twin and row.bug != row.twin}
    missing = [name for name in builtin_names() if name not in planted]
    assert not missing, f"built-in checks with no planted bug and twin in tests/replay: {missing}"

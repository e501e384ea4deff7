"""Every planted bug in the suite with its correct twin, for the replay test (``tests/test_replay.py``).

Each table module lists :class:`Planted` rows; ``ROWS`` gathers them. A row says: on ``bug``, cell ``check``
fails (its message holds ``words``), its replay script exits 1 and ``audit repro`` fails on the shrunk case;
with ``twin`` swapped in, the same script exits 0 and ``audit repro`` holds on the same case.
"""

from __future__ import annotations

from typing import NamedTuple


class Planted(NamedTuple):
    """One planted bug, the cell that must catch it, and its correct twin."""

    bug: str  #: "module:Name" of the broken target
    check: str
    spec: dict  #: registry keys of the entry (as for ``tests.helpers.entry``), without the target
    twin: str  #: "module:Name" of the correct target with the same interface
    words: str = ""  #: words the failure message must contain
    dtype: str = "float64"

    @property
    def id(self) -> str:
        """A readable test id: the bug's module and name, and the check (two fixture modules may plant bugs
        of the same name, and the test keys its results by this id)."""
        module, _, name = self.bug.rpartition(":")  # an op is "namespace::name"
        return f"{module.rstrip(':').rsplit('.', 1)[-1]}.{name}-{self.check}"


def rows() -> list[Planted]:
    """Every table's rows."""
    from tests.replay import (complex, core, degenerate, intended, intended_vjp, interpreted, precision, safety, sparse,
                              stochastic, transforms_layers)

    found = [*core.ROWS, *safety.ROWS, *transforms_layers.ROWS, *precision.ROWS, *complex.ROWS, *sparse.ROWS,
             *stochastic.ROWS, *degenerate.ROWS, *interpreted.ROWS, *intended.ROWS, *intended_vjp.ROWS]
    ids = [row.id for row in found]
    assert len(set(ids)) == len(ids), f"two rows share an id: {sorted(i for i in ids if ids.count(i) > 1)}"
    return found


def not_replayed() -> dict[str, str]:
    """Fixtures that are neither a planted bug with a row nor a twin: name -> the written reason."""
    from tests.replay import (complex, core, degenerate, intended, intended_vjp, interpreted, precision, records,
                              safety, sparse, stochastic, transforms_layers)

    return {**records.not_replayed(), **intended.NOT_REPLAYED, **intended_vjp.NOT_REPLAYED,
            **core.NOT_REPLAYED, **safety.NOT_REPLAYED, **transforms_layers.NOT_REPLAYED, **precision.NOT_REPLAYED,
            **complex.NOT_REPLAYED, **sparse.NOT_REPLAYED, **stochastic.NOT_REPLAYED, **degenerate.NOT_REPLAYED,
            **interpreted.NOT_REPLAYED}

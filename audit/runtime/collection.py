"""Python's cyclic garbage collector, tuned for a worker: a long-lived process whose start-up objects never die and
whose cells make millions of short-lived ones.

With Python's defaults a worker spent about 7% of the overhead benchmark's cells collecting (2.4-3.3 s of CPU a pass;
``bench/results.md``): every 700 allocations a young collection, and each full collection traverses the half million
objects torch, Hypothesis and the audit import, which are never garbage. Frozen out of collection and collected young
every :data:`YOUNG` allocations, it spends 1.0-1.3 s. Reference counting still frees everything that is not in a cycle
at once (tensors, autograd graphs); only cyclic garbage (an exception's traceback and its frames) waits a little longer.
"""

from __future__ import annotations

import gc

#: Net allocations between collections of the youngest generation (Python's default: 700).
YOUNG = 50_000


def tune() -> None:
    """Collect once, freeze what is left (the start-up's objects) out of every later collection, and collect the
    youngest generation every :data:`YOUNG` allocations; the older generations keep their thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG, *gc.get_threshold()[1:])

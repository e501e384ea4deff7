"""What the distributed check and its rank processes (:mod:`audit.runtime.ddp_rank`) say over their pipes: one
type per message, dispatched by type. Both sides import it; it lives in the lower layer, with the ranks.

The check writes each cell's :class:`RankSpec` to a file once and sends :class:`GradientsRequest` per example; a
rank answers :class:`Joined` once it joined the process group, then :class:`Gradients` or :class:`RankError` per
request.
"""

from __future__ import annotations

from dataclasses import dataclass

from audit.registry.model import Entry


@dataclass(frozen=True)
class RankSpec:
    """What a rank loads a cell's subject from (pickled to a file): the entry, the folder its target is
    resolved from, the dtype and the seed."""

    entry: Entry
    base: str
    dtype: str
    seed: int


@dataclass(frozen=True)
class GradientsRequest:
    """One example: the file of the cell's :class:`RankSpec`, the case (as JSON) and the batch dim to split."""

    spec: str
    case: dict
    dim: str


@dataclass(frozen=True)
class Joined:
    """The rank joined the process group: its start-up is over."""


@dataclass(frozen=True)
class Gradients:
    """Each parameter's gradient on this rank (times the world size), by input index, as float lists."""

    grads: dict[str, list]


@dataclass(frozen=True)
class RankError:
    """The request failed on this rank: the exception and where it was raised."""

    error: str

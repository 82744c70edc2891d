"""Two-level hierarchical collectives: a lower algorithm inside groups, an upper one across leaders.

S-Caffe (Awan et al., section 5) reduces inside groups of `chain size` ranks with a chunked chain and then
across the group leaders with a binomial tree ("CB") or a chain ("CC"); Zhang, Li, Tanimura and Nakada's "layered butterfly"
is butterfly inside each leaf switch, then butterfly across leaders. Groups are runs of `group_size`
consecutive ranks (the last may be smaller); the first rank of each group is its leader. For reduce and
broadcast the ranks are taken relative to the root, so the root leads the first group.

allreduce = lower reduce to leaders, upper allreduce across leaders, lower broadcast from leaders.

Try it: `fabriclab collectives show --algo hierarchical:lower=chain:upper=binomial:group=2 --ranks 6`.
"""

from __future__ import annotations

from typing import Callable

from fabriclab.collectives import recursive, ring, trees
from fabriclab.collectives.schedule import Builder

Level = Callable[[Builder, list[int], tuple[int, int], int], None]


def _ignore_chunks(fn) -> Level:
    return lambda b, ranks, rng, num_chunks: fn(b, ranks, rng)


REDUCE: dict[str, Level] = {
    "chain": trees.chain_reduce,
    "binomial": trees.binomial_reduce,
    "ring": _ignore_chunks(ring.ring_reduce),
    "butterfly": _ignore_chunks(recursive.butterfly_reduce),
}
BROADCAST: dict[str, Level] = {
    "chain": trees.chain_broadcast,
    "binomial": trees.binomial_broadcast,
    "ring": _ignore_chunks(ring.ring_broadcast),
    "butterfly": _ignore_chunks(recursive.butterfly_broadcast),
}
ALLREDUCE: dict[str, Level] = {
    "chain": trees.chain_allreduce,
    "binomial": trees.binomial_allreduce,
    "ring": _ignore_chunks(ring.ring_allreduce),
    "butterfly": _ignore_chunks(recursive.butterfly_allreduce),
}
LEVELS = tuple(REDUCE)


def groups_of(ranks: list[int], group_size: int) -> list[list[int]]:
    return [ranks[i:i + group_size] for i in range(0, len(ranks), group_size)]


def hierarchical_reduce(b: Builder, ranks: list[int], rng: tuple[int, int], *, lower: str, upper: str,
                        group_size: int, num_chunks: int) -> None:
    """Reduce inside groups to their leaders, then across leaders to `ranks[0]`."""
    groups = groups_of(ranks, group_size)
    for group in groups:
        REDUCE[lower](b, group, rng, num_chunks)
    REDUCE[upper](b, [g[0] for g in groups], rng, num_chunks)


def hierarchical_broadcast(b: Builder, ranks: list[int], rng: tuple[int, int], *, lower: str, upper: str,
                           group_size: int, num_chunks: int) -> None:
    """Broadcast from `ranks[0]` across leaders, then inside every group."""
    groups = groups_of(ranks, group_size)
    BROADCAST[upper](b, [g[0] for g in groups], rng, num_chunks)
    for group in groups:
        BROADCAST[lower](b, group, rng, num_chunks)


def hierarchical_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int], *, lower: str, upper: str,
                           group_size: int, num_chunks: int) -> None:
    """Lower reduce to leaders, upper allreduce across leaders, lower broadcast from leaders."""
    groups = groups_of(ranks, group_size)
    for group in groups:
        REDUCE[lower](b, group, rng, num_chunks)
    ALLREDUCE[upper](b, [g[0] for g in groups], rng, num_chunks)
    for group in groups:
        BROADCAST[lower](b, group, rng, num_chunks)

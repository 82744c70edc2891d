"""Ring algorithms: reduce-scatter, allgather and allreduce (reduce-scatter + allgather).

The bandwidth-optimal ring of Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for
clusters of workstations" (JPDC 2009), as used by Baidu's ring allreduce, Horovod and NCCL. Each of the
2(P-1) steps sends one block of S/P to the next rank and receives one from the previous.

Every function writes into a `Builder` for a *group*: `ranks` lists the member ranks in ring order and
`rng` is the element range `(offset, length)` the group works on, so hierarchical algorithms can run a
ring inside a subset of ranks on a part of the buffer. Block i of the range belongs to `ranks[i]`.

Try it: `fabriclab collectives show --algo ring --ranks 4`.
"""

from __future__ import annotations

from fabriclab.collectives.schedule import Builder, split_range


def ring_reduce_scatter(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """After P-1 steps `ranks[i]` holds block i reduced over the group."""
    g = len(ranks)
    blocks = split_range(*rng, g)
    for s in range(g - 1):
        for i, r in enumerate(ranks):
            (b.step(r)
             .send(ranks[(i + 1) % g], blocks[(i - s - 1) % g])
             .recv_reduce(ranks[(i - 1) % g], blocks[(i - s - 2) % g]))


def ring_allgather(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """`ranks[i]` starts with block i; after P-1 steps every member holds every block."""
    g = len(ranks)
    blocks = split_range(*rng, g)
    for s in range(g - 1):
        for i, r in enumerate(ranks):
            (b.step(r)
             .send(ranks[(i + 1) % g], blocks[(i - s) % g])
             .recv_copy(ranks[(i - 1) % g], blocks[(i - s - 1) % g]))


def ring_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Reduce-scatter then allgather around the ring: 2(P-1) steps of S/P each."""
    ring_reduce_scatter(b, ranks, rng)
    ring_allgather(b, ranks, rng)


def ring_reduce(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Reduce to `ranks[0]`: ring reduce-scatter, then every member sends its block to the root."""
    ring_reduce_scatter(b, ranks, rng)
    gather_blocks(b, ranks, rng)


def ring_broadcast(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Broadcast from `ranks[0]`: scatter the blocks, then ring allgather (van de Geijn's broadcast)."""
    scatter_blocks(b, ranks, rng)
    ring_allgather(b, ranks, rng)


def gather_blocks(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Every member sends block i to `ranks[0]` in one step (a direct gather)."""
    if len(ranks) < 2:
        return
    blocks = split_range(*rng, len(ranks))
    root = b.step(ranks[0])
    for i in range(1, len(ranks)):
        b.step(ranks[i]).send(ranks[0], blocks[i])
        root.recv_copy(ranks[i], blocks[i])


def scatter_blocks(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """`ranks[0]` sends block i to member i in one step (a direct scatter)."""
    if len(ranks) < 2:
        return
    blocks = split_range(*rng, len(ranks))
    root = b.step(ranks[0])
    for i in range(1, len(ranks)):
        root.send(ranks[i], blocks[i])
        b.step(ranks[i]).recv_copy(ranks[0], blocks[i])

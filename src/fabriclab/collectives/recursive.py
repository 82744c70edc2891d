"""Recursive halving and doubling: the butterfly family, for any number of ranks.

* Rabenseifner's allreduce ("butterfly", recursive halving-doubling): reduce-scatter by recursive
  halving, then allgather by recursive doubling (Thakur, Rabenseifner & Gropp, "Optimization of
  collective communication operations in MPICH", IJHPCA 2005, section 4.4).
* Recursive-doubling allreduce: log2(P) exchanges of the whole buffer (same paper, section 4.4).
* Reduce-scatter by recursive halving and allgather by recursive doubling (sections 4.2, 4.5).

Non-powers of two are handled as in MPICH: with p' the largest power of two <= P and rem = P - p', the
first 2*rem group members pair up, the even one of each pair hands its data to the odd one ("fold")
and sits out, and gets the result back at the end ("unfold"). The order of partners is a parameter:
`near` (distance 1, 2, 4, ...: MPICH's order) or `far` (distance p'/2 first).

Try it: `fabriclab collectives show --algo butterfly --ranks 6`.
"""

from __future__ import annotations

from fabriclab.collectives.schedule import Builder, split_range

NEAR, FAR = "near", "far"


def _power_split(g: int) -> tuple[int, int]:
    p2 = 1 << (g.bit_length() - 1)
    return p2, g - p2


def _members(ranks: list[int]) -> tuple[list[int], int]:
    """The p' ranks that stay in after the fold, indexed by their new rank, and rem."""
    p2, rem = _power_split(len(ranks))
    return [ranks[2 * j + 1] if j < rem else ranks[j + rem] for j in range(p2)], rem


def _masks(p2: int, order: str) -> list[int]:
    masks = [1 << i for i in range(p2.bit_length() - 1)]
    return masks if order == NEAR else masks[::-1]


def _held(n: int, masks: list[int], p2: int, upto: int) -> tuple[int, int]:
    """First group index and number of groups new rank `n` holds after `upto` halving steps."""
    base = 0
    for j in range(upto):
        if n & masks[j]:
            base += p2 >> (j + 1)
    return base, p2 >> upto


def _span(groups: list[tuple[int, int]], first: int, num: int) -> tuple[int, int]:
    """Element range covered by `num` consecutive groups starting at `first`."""
    start = groups[first][0]
    last = groups[first + num - 1]
    return start, last[0] + last[1] - start


def _fold(b: Builder, ranks: list[int], rng: tuple[int, int], reduce: bool) -> None:
    _, rem = _power_split(len(ranks))
    for j in range(rem):
        even, odd = ranks[2 * j], ranks[2 * j + 1]
        b.step(even).send(odd, rng)
        if reduce:
            b.step(odd).recv_reduce(even, rng)
        else:
            b.step(odd).recv_copy(even, rng)


def _unfold(b: Builder, ranks: list[int], rng: tuple[int, int], first: int = 0) -> None:
    _, rem = _power_split(len(ranks))
    for j in range(first, rem):
        even, odd = ranks[2 * j], ranks[2 * j + 1]
        b.step(odd).send(even, rng)
        b.step(even).recv_copy(odd, rng)


def halving(b: Builder, members: list[int], groups: list[tuple[int, int]], order: str) -> None:
    """Recursive halving over p' members: new rank n ends holding its final group fully reduced."""
    p2 = len(members)
    masks = _masks(p2, order)
    for j, m in enumerate(masks):
        for n, r in enumerate(members):
            base, size = _held(n, masks, p2, j)
            half = size // 2
            lower, upper = _span(groups, base, half), _span(groups, base + half, half)
            keep, give = (upper, lower) if n & m else (lower, upper)
            b.step(r).send(members[n ^ m], give).recv_reduce(members[n ^ m], keep)


def doubling(b: Builder, members: list[int], groups: list[tuple[int, int]], order: str) -> None:
    """Recursive doubling over p' members, the mirror of `halving`: everyone ends with all groups."""
    p2 = len(members)
    masks = _masks(p2, order)
    for j in reversed(range(len(masks))):
        for n, r in enumerate(members):
            partner = n ^ masks[j]
            mine = _span(groups, *_held(n, masks, p2, j + 1))
            theirs = _span(groups, *_held(partner, masks, p2, j + 1))
            b.step(r).send(members[partner], mine).recv_copy(members[partner], theirs)


def final_group(n: int, p2: int, order: str) -> int:
    """Index of the group new rank `n` holds after halving."""
    masks = _masks(p2, order)
    return _held(n, masks, p2, len(masks))[0]


def butterfly_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int], order: str = NEAR) -> None:
    """Rabenseifner: fold, halving reduce-scatter, doubling allgather, unfold."""
    members, _ = _members(ranks)
    groups = split_range(*rng, len(members))
    _fold(b, ranks, rng, reduce=True)
    halving(b, members, groups, order)
    doubling(b, members, groups, order)
    _unfold(b, ranks, rng)


def recursive_doubling_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """log2(p') exchanges of the whole buffer with partner n ^ 2^k, each followed by a reduce."""
    members, _ = _members(ranks)
    _fold(b, ranks, rng, reduce=True)
    mask = 1
    while mask < len(members):
        for n, r in enumerate(members):
            b.step(r).send(members[n ^ mask], rng).recv_reduce(members[n ^ mask], rng)
        mask <<= 1
    _unfold(b, ranks, rng)


def _owned_groups(ranks: list[int], rng: tuple[int, int]) -> list[tuple[int, int]]:
    """Groups of the natural block layout: new rank j < rem owns the blocks of both its ranks."""
    p2, rem = _power_split(len(ranks))
    blocks = split_range(*rng, len(ranks))
    groups = []
    for j in range(p2):
        if j < rem:
            groups.append((blocks[2 * j][0], blocks[2 * j][1] + blocks[2 * j + 1][1]))
        else:
            groups.append(blocks[j + rem])
    return groups


def halving_reduce_scatter(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Reduce-scatter by recursive halving (far partner first, so new rank j ends with group j)."""
    members, rem = _members(ranks)
    groups = _owned_groups(ranks, rng)
    blocks = split_range(*rng, len(ranks))
    _fold(b, ranks, rng, reduce=True)
    halving(b, members, groups, FAR)
    for j in range(rem):
        b.step(ranks[2 * j + 1]).send(ranks[2 * j], blocks[2 * j])
        b.step(ranks[2 * j]).recv_copy(ranks[2 * j + 1], blocks[2 * j])


def doubling_allgather(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Allgather by recursive doubling; `ranks[i]` starts with block i of the range."""
    members, rem = _members(ranks)
    groups = _owned_groups(ranks, rng)
    blocks = split_range(*rng, len(ranks))
    for j in range(rem):
        b.step(ranks[2 * j]).send(ranks[2 * j + 1], blocks[2 * j])
        b.step(ranks[2 * j + 1]).recv_copy(ranks[2 * j], blocks[2 * j])
    doubling(b, members, groups, FAR)
    _unfold(b, ranks, rng)


def butterfly_reduce(b: Builder, ranks: list[int], rng: tuple[int, int], order: str = FAR) -> None:
    """Reduce to `ranks[0]`: fold, recursive halving, then every member sends its group to the root.

    MPICH gathers with a binomial tree; a direct gather moves the same bytes into the root in fewer
    steps, which is what a hierarchical schedule's lower level wants."""
    members, _ = _members(ranks)
    groups = split_range(*rng, len(members))
    _fold(b, ranks, rng, reduce=True)
    halving(b, members, groups, order)
    root = b.step(ranks[0])
    for n, r in enumerate(members):
        if r != ranks[0]:
            mine = groups[final_group(n, len(members), order)]
            b.step(r).send(ranks[0], mine)
            root.recv_copy(r, mine)


def butterfly_broadcast(b: Builder, ranks: list[int], rng: tuple[int, int], order: str = FAR) -> None:
    """Broadcast from `ranks[0]`: scatter p' groups, recursive-doubling allgather, unfold."""
    members, _ = _members(ranks)
    groups = split_range(*rng, len(members))
    root = b.step(ranks[0])
    for n, r in enumerate(members):
        if r != ranks[0]:
            mine = groups[final_group(n, len(members), order)]
            root.send(r, mine)
            b.step(r).recv_copy(ranks[0], mine)
    doubling(b, members, groups, order)
    # The root, folded out when rem > 0, already holds everything: skip its unfold.
    _unfold(b, ranks, rng, first=1)


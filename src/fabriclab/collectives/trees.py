"""Tree algorithms: binomial, chunked chain (a pipelined path) and NCCL's double binary tree.

* Binomial reduce and broadcast as in MPICH (Thakur et al., IJHPCA 2005, sections 4.1 and 4.3);
  S-Caffe models them as T(Bin) = log2(P) * t(b) (Awan et al., section 5).
* Chunked chain (S-Caffe's "CC", Awan et al. section 5): the buffer is cut into `num_chunks` chunks that
  flow down a path of ranks; T(CC) = (n + P - 2) * t(c) for n chunks of time t(c) each.
* Double binary tree (Sanders, Speck & Traeff, "Two-tree algorithms for full bandwidth broadcast,
  reduction and scan", Parallel Computing 2009), built as NCCL's `ncclGetBtree`/`ncclGetDtree`: ranks
  whose lowest set bit decides their level form tree one; tree two is its mirror (even P) or its
  shift by one (odd P), so a leaf of one tree is an inner node of the other. Each tree reduces and then
  broadcasts half of the buffer, pipelined over `num_chunks` chunks.

Functions take the group's ranks with the root first (`ranks[0]`), and the element range to work on.

Try it: `fabriclab collectives show --algo chain:chunks=3 --ranks 4`.
"""

from __future__ import annotations

from fabriclab.collectives.schedule import Builder, split_range


def binomial_reduce(b: Builder, ranks: list[int], rng: tuple[int, int], num_chunks: int = 1) -> None:
    """Reduce to `ranks[0]` along a binomial tree, one step per child, chunk after chunk."""
    g = len(ranks)
    for chunk in split_range(*rng, num_chunks):
        for v, r in enumerate(ranks):
            mask = 1
            while mask < g:
                if v & mask:
                    b.step(r).send(ranks[v - mask], chunk)
                    break
                if v + mask < g:
                    b.step(r).recv_reduce(ranks[v + mask], chunk)
                mask <<= 1


def binomial_broadcast(b: Builder, ranks: list[int], rng: tuple[int, int], num_chunks: int = 1) -> None:
    """Broadcast from `ranks[0]` along a binomial tree (farthest child first)."""
    g = len(ranks)
    top = 1 << max(g - 1, 0).bit_length()
    for chunk in split_range(*rng, num_chunks):
        for v, r in enumerate(ranks):
            mask = 1
            while mask < g:
                if v & mask:
                    b.step(r).recv_copy(ranks[v - mask], chunk)
                    break
                mask <<= 1
            mask = min(mask, top) >> 1
            while mask > 0:
                if v + mask < g:
                    b.step(r).send(ranks[v + mask], chunk)
                mask >>= 1


def chain_reduce(b: Builder, ranks: list[int], rng: tuple[int, int], num_chunks: int = 1) -> None:
    """Pipelined chain towards `ranks[0]`: in step k a rank receives chunk k and forwards chunk k-1."""
    g = len(ranks)
    chunks = split_range(*rng, num_chunks)
    for i in range(1, g):
        for k in range(num_chunks + (1 if i < g - 1 else 0)):
            step = b.step(ranks[i])
            if i < g - 1 and k < num_chunks:
                step.recv_reduce(ranks[i + 1], chunks[k])
            if k >= 1 or i == g - 1:
                step.send(ranks[i - 1], chunks[k - 1 if i < g - 1 else k])
    if g > 1:
        for k in range(num_chunks):
            b.step(ranks[0]).recv_reduce(ranks[1], chunks[k])


def chain_broadcast(b: Builder, ranks: list[int], rng: tuple[int, int], num_chunks: int = 1) -> None:
    """Pipelined chain from `ranks[0]`: in step k a rank receives chunk k and forwards chunk k-1."""
    g = len(ranks)
    chunks = split_range(*rng, num_chunks)
    if g < 2:
        return
    for k in range(num_chunks):
        b.step(ranks[0]).send(ranks[1], chunks[k])
    for i in range(1, g):
        for k in range(num_chunks + (1 if i < g - 1 else 0)):
            step = b.step(ranks[i])
            if k < num_chunks:
                step.recv_copy(ranks[i - 1], chunks[k])
            if i < g - 1 and k >= 1:
                step.send(ranks[i + 1], chunks[k - 1])


def chain_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int], num_chunks: int = 1) -> None:
    """S-Caffe's chunked chain reduce to `ranks[0]` followed by a chunked chain broadcast."""
    chain_reduce(b, ranks, rng, num_chunks)
    chain_broadcast(b, ranks, rng, num_chunks)


def binomial_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int], num_chunks: int = 1) -> None:
    """Binomial reduce to `ranks[0]` followed by a binomial broadcast."""
    binomial_reduce(b, ranks, rng, num_chunks)
    binomial_broadcast(b, ranks, rng, num_chunks)


def btree_parents(n: int) -> list[int]:
    """Parent of every rank in NCCL's binary tree (`ncclGetBtree`); the root 0 has parent -1."""
    parents = [-1] * n
    for rank in range(1, n):
        bit = 1
        while bit < n and not bit & rank:
            bit <<= 1
        up = (rank ^ bit) | (bit << 1)
        parents[rank] = up if up < n else rank ^ bit
    return parents


def dtree_parents(n: int) -> tuple[list[int], list[int]]:
    """The two complementary trees of NCCL's double binary tree (`ncclGetDtree`)."""
    first = btree_parents(n)
    if n % 2:
        to_tree, from_tree = (lambda r: (r - 1) % n), (lambda r: (r + 1) % n)
    else:
        to_tree, from_tree = (lambda r: n - 1 - r), (lambda r: n - 1 - r)
    second = [-1 if first[to_tree(r)] < 0 else from_tree(first[to_tree(r)]) for r in range(n)]
    return first, second


def _tree_events(parents: list[int], chunks: list[tuple[int, int]], events: dict) -> None:
    """Add the timed transfers of a pipelined reduce-then-broadcast on one tree to `events`.

    A node of height h (leaves: 0) sends chunk k up at time k + h, after its children sent theirs;
    the root of height H sends chunk k down at time H + k, and a node at depth d forwards it at
    H + k + d. Every transfer has one time at both ends, so ranks that run their transfers in time
    order never wait on each other in a cycle, however many trees share them."""
    n = len(parents)
    children: list[list[int]] = [[] for _ in range(n)]
    for v, p in enumerate(parents):
        if p >= 0:
            children[p].append(v)
    height = [0] * n
    depth = [0] * n
    order = sorted(range(n), key=lambda v: _depth(parents, v))
    for v in order:
        depth[v] = 0 if parents[v] < 0 else depth[parents[v]] + 1
    for v in reversed(order):
        height[v] = max((height[c] + 1 for c in children[v]), default=0)
    top = height[order[0]]
    for k, chunk in enumerate(chunks):
        for v, p in enumerate(parents):
            if p >= 0:
                events.setdefault(k + height[v], []).append((v, p, chunk, True))
                events.setdefault(top + k + depth[p], []).append((p, v, chunk, False))


def _depth(parents: list[int], v: int) -> int:
    d = 0
    while parents[v] >= 0:
        v, d = parents[v], d + 1
    return d


def _emit_timed(b: Builder, ranks: list[int], events: dict) -> None:
    """One step per rank and time; within a step, ops sorted by chunk so both ends agree on FIFO order."""
    for t in sorted(events):
        per_rank: dict[int, list] = {}
        for src, dst, chunk, reduce in events[t]:
            per_rank.setdefault(src, []).append((chunk, "send", dst))
            per_rank.setdefault(dst, []).append((chunk, "recv_reduce" if reduce else "recv_copy", src))
        for v, ops in sorted(per_rank.items()):
            step = b.step(ranks[v])
            for chunk, kind, peer in sorted(ops):
                getattr(step, kind)(ranks[peer], chunk)


def double_binary_tree_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int],
                                 num_chunks: int = 1) -> None:
    """Each of NCCL's two trees reduces and broadcasts one half; their steps run side by side."""
    g = len(ranks)
    if g < 2:
        return
    events: dict = {}
    for parents, half in zip(dtree_parents(g), split_range(*rng, 2)):
        _tree_events(parents, split_range(*half, num_chunks), events)
    _emit_timed(b, ranks, events)

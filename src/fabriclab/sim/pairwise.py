"""All-to-all on a GPU cluster in classes: every GPU sends to every other at once, never enumerated.

An all-to-all of n GPUs is n(n-1) transfers (10^10 at 100,000 GPUs); its max-min rates follow from far
fewer classes because servers that sit alike are interchangeable. On `fabric/rail.py`'s topologies a route
depends on a server only through the leaves of its NICs and the spine a message to each NIC crosses
(D-mod-K), and in an all-to-all every server sends to every other, so:

1. *Server classes* by colour refinement: start from each server's spine indices (one per NIC); a leaf's
   class is the multiset of (server class, NIC) on its ports; a server's class adds the classes of its
   NICs' leaves; repeat until no class splits (multisets compared exactly).
2. *Flow classes*: (source class, destination class, same server / same leaf / across leaves on the rail
   the route takes, source GPU, destination GPU). They are counted, not listed: per rail k and pair of
   classes, same-leaf pairs are the sum over leaves of the product of the classes' NIC counts there (less
   each server with itself), across-leaf pairs the rest; one representative pair of servers per kind
   gives the route (the topology's own router).
3. *Link classes*: the pair of classes of a link's end nodes (GPUs, NICs, NVSwitches and root complexes by
   their server's class, leaves by theirs, each spine its own). A link of a class carries
   N x (links of that class on one route) / (links in the class) flows of a flow class of N flows.

Servers of one class have the same leaves, spines and partners, so every flow of a class crosses the same
link classes and every link of a class carries the same number of each flow class (the count above is a
whole number; checked): an equitable partition, so max-min water-filling and every start and end event
treat a class as one flow (`sim/batch.py`). At 100,000 GPUs of a rail-optimised fabric: about 50 server
classes and 240,000 flow classes, 2 s; a plain fat tree whose leaves hold whole servers: a few hundred.
Only topologies of `fabric/rail.py` with every GPU of every server taking part are classed here; tests
compare with the general engine (`engine.run`) on every transfer at small sizes.

Try it: `python -m pytest tests/sim/test_pairwise.py`.
"""

from __future__ import annotations

import numpy as np

from fabriclab.sim.batch import FlowBatch

def dense_ids(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(id of each row of the stacked non-negative integer columns, in row order; index of one row per id)."""
    cols = [np.asarray(c, dtype=np.int64).ravel() for c in columns]
    key, span = np.zeros(cols[0].size, dtype=np.int64), 1
    for c in cols:
        top = int(c.max(initial=0)) + 1
        if span * top >= 1 << 62:  # too wide for one int64: compare whole rows
            _, first, ids = np.unique(np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True)
            return ids.ravel(), first
        key, span = key * top + c, span * top
    _, first, ids = np.unique(key, return_index=True, return_inverse=True)
    return ids.ravel(), first


def leaf_classes(router, cls: np.ndarray) -> np.ndarray:
    """Class of every leaf: the multiset of (server class, NIC) on its ports, compared exactly."""
    keys = (cls[:, None] * router.K + np.arange(router.K)).ravel()
    leaf = router.nic_leaf.ravel()
    pair, first = dense_ids(leaf, keys)  # ids sorted by (leaf, key)
    count, leaf_of, key_of = np.bincount(pair), leaf[first], keys[first]
    cuts = np.flatnonzero(np.diff(leaf_of)) + 1
    rows = np.stack([key_of, count], axis=1)
    seen: dict[bytes, int] = {}
    out = np.empty(router.num_leaves, dtype=np.int64)
    for lf, part in zip(leaf_of[np.concatenate(([0], cuts))].tolist(), np.split(rows, cuts)):
        out[lf] = seen.setdefault(part.tobytes(), len(seen))
    return out


def refine_servers(router) -> tuple[np.ndarray, np.ndarray]:
    """(class of every server, class of every leaf): from the spine index of each NIC, then the classes of
    a server's leaves (the multiset of (server class, NIC) on each), until no class splits."""
    cls = dense_ids(*(router.nic_spine.T + 1))[0]
    while True:
        num = int(cls.max()) + 1
        leaf_cls = leaf_classes(router, cls)
        new = dense_ids(cls, *leaf_cls[router.nic_leaf].T)[0]
        if int(new.max()) + 1 == num:
            return cls, leaf_cls
        cls = new


def node_classes(router, cls: np.ndarray, leaf_cls: np.ndarray) -> np.ndarray:
    """Class of every node: GPUs (server class, GPU), hubs (server class), NICs (server class, NIC), leaves
    (leaf class), spines (each its own); kinds kept apart by offsets."""
    G, K = router.G, router.K
    nc = int(cls.max()) + 1
    parts, base, local = [(cls[:, None] * G + np.arange(G)).ravel()], nc * G, []
    if router.hub:
        local.append(base + cls[:, None])
        base += nc
    local.append(base + cls[:, None] * K + np.arange(K))
    parts.append(np.concatenate(local, axis=1).ravel())
    base += nc * K
    parts += [base + leaf_cls, base + int(leaf_cls.max(initial=0)) + 1 + np.arange(router.num_spines)]
    return np.concatenate(parts)


def assemble(topology, cls: np.ndarray, leaf_cls: np.ndarray, src: np.ndarray, dst: np.ndarray,
             num_flows: np.ndarray, size_bytes: float) -> FlowBatch:
    """The batch of flow classes with representative transfers src[i] -> dst[i], each standing for
    `num_flows[i]` transfers."""
    node_cls = node_classes(topology.router, cls, leaf_cls)
    link_col, column_link = dense_ids(node_cls[topology.link_src], node_cls[topology.link_dst])
    col_size = np.bincount(link_col)
    offsets, links = topology.routes(src, dst)
    entry_class = np.repeat(np.arange(src.size), np.diff(offsets))
    pairs, first = dense_ids(entry_class, link_col[links])
    hops = np.bincount(pairs).astype(np.float64)
    entry_class, entry_column = entry_class[first], link_col[links][first]
    users = num_flows[entry_class] * hops / col_size[entry_column]
    assert np.allclose(users, np.round(users), rtol=1e-9), "link classes must carry whole flows"
    return FlowBatch(entry_class=entry_class, entry_column=entry_column, entry_hops=hops,
                     entry_users=np.round(users), column_link=column_link,
                     size_bytes=np.full(src.size, float(size_bytes)),
                     num_flows=num_flows)


def _pair_counts(router, cls: np.ndarray, nc: int) -> tuple[np.ndarray, np.ndarray]:
    """(same-leaf, across-leaf) ordered pairs of distinct servers per (rail k, class A, class B)."""
    size = np.bincount(cls, minlength=nc).astype(np.float64)
    same = np.empty((router.K, nc, nc))
    for k in range(router.K):
        m = np.bincount(router.nic_leaf[:, k] * nc + cls, minlength=router.num_leaves * nc)
        m = m.reshape(router.num_leaves, nc).astype(np.float64)
        same[k] = m.T @ m - np.diag(size)
    return same, np.outer(size, size) - np.diag(size) - same


def _firsts(cls: np.ndarray, nc: int, leaf: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per class: its first server, and a server of it on another leaf than that one's (-1: none)."""
    first = np.full(nc, -1, dtype=np.int64)
    first[cls[::-1]] = np.arange(cls.size)[::-1]
    elsewhere = np.flatnonzero(leaf != leaf[first[cls]])
    other = np.full(nc, -1, dtype=np.int64)
    other[cls[elsewhere][::-1]] = elsewhere[::-1]
    return first, other


def _representatives(router, cls: np.ndarray, leaf_cls: np.ndarray, nc: int, same: np.ndarray,
                     cross: np.ndarray) -> dict:
    """(kind, k, A, B) -> (server of A, server of B) for every kind of pair that occurs: kind 1 on one leaf
    of rail k (one leaf of each leaf class holds every such pair), kind 2 on different leaves of rail k."""
    reps: dict = {}
    _, leaf_rep = np.unique(leaf_cls, return_index=True)
    for k in range(router.K):
        leaf = router.nic_leaf[:, k]
        first, other = _firsts(cls, nc, leaf)
        for a, b in zip(*np.nonzero(cross[k] > 0)):
            reps[(2, k, a, b)] = next((x, y) for x in (first[a], other[a]) for y in (first[b], other[b])
                                      if x >= 0 and y >= 0 and leaf[x] != leaf[y])
        for lf in leaf_rep:
            by_class: dict[int, list[int]] = {}
            for s in np.flatnonzero(leaf == lf).tolist():
                if len(by_class.setdefault(int(cls[s]), [])) < 2:
                    by_class[int(cls[s])].append(s)
            for a, xs in by_class.items():
                for b, ys in by_class.items():
                    pick = [(x, y) for x in xs for y in ys if x != y]
                    if pick and same[k, a, b] > 0:
                        reps.setdefault((1, k, a, b), pick[0])
    return reps


def all_to_all_batch(topology, size_bytes: float) -> FlowBatch:
    """Every GPU of `topology` (a `fabric.rail.gpu_cluster_topology`) sends `size_bytes` to every other."""
    r = topology.router
    S, G, K = r.S, r.G, r.K
    cls, leaf_cls = refine_servers(r)
    nc = int(cls.max()) + 1
    same, cross = _pair_counts(r, cls, nc)
    first = np.full(nc, -1, dtype=np.int64)
    first[cls[::-1]] = np.arange(S)[::-1]
    # inside one server: every ordered pair of its GPUs, as many as the class has servers
    ga, gb = np.nonzero(~np.eye(G, dtype=bool))
    src, dst = [(first[:, None] * G + ga).ravel()], [(first[:, None] * G + gb).ravel()]
    count = [np.repeat(np.bincount(cls, minlength=nc), ga.size).astype(np.float64)]
    # two servers: the GPU pairs whose route takes rail k (the destination's NIC over NVLink, else the source's)
    ga, gb = np.divmod(np.arange(G * G), G)
    rail = (gb if r.nvswitch else ga) * K // G
    for (kind, k, a, b), (x, y) in _representatives(r, cls, leaf_cls, nc, same, cross).items():
        on = rail == k
        src.append(x * G + ga[on])
        dst.append(y * G + gb[on])
        count.append(np.full(int(on.sum()), (same if kind == 1 else cross)[k, a, b]))
    src, dst, count = np.concatenate(src), np.concatenate(dst), np.concatenate(count)
    n = S * G
    assert abs(count.sum() - n * (n - 1)) <= 1e-9 * n * n, "flow classes must cover every ordered pair once"
    return assemble(topology, cls, leaf_cls, src, dst, count, size_bytes)

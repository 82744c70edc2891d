"""Fold a batch of flows by its symmetry: flows and links that see the same are solved once.

Colour refinement on the bipartite graph of flow classes and links (a link is a column of an explicit
`FlowBatch`): a flow's colour becomes its own plus the multiset of (colour of each link it crosses, times),
a link's its own plus the multiset of (colour of each flow class on it, how many flows); repeat until no
colour splits. Flows start coloured by size, links by kind (bandwidth and latency of the shape they were
built on), so the result holds for every assignment of rates and latencies to the kinds.

The stable colouring is an *equitable partition*: every flow of a colour crosses the same number of links
of each link colour, and every link of a colour carries the same number of flows of each flow colour. Max-
min water-filling then raises, freezes and fills whole colours at once, and start and end events come to
whole colours, so the quotient (one class per flow colour, one column per link colour, the per-link counts
as `entry_users`) runs exactly as the batch itself (`sim/batch.py`). A ring of 16 channels on 100,000 GPUs
folds 200,000 flow classes into 4; a double binary tree's 400,000 into some 30,000 (a heap's
positions against the leaf boundaries differ); no topology or pattern is assumed.

Multisets are compared by random 64-bit sums (exact integer arithmetic); the quotient is then checked
against the batch entry by entry, and a batch whose colouring fails the check is returned unfolded.

Try it: `python -m pytest tests/sim/test_refine.py`.
"""

from __future__ import annotations

import numpy as np

from fabriclab.sim.batch import FlowBatch

# Any fixed seed: the random table only has to be the same in every run (deterministic answers).
_SEED = 20240601
# Odd 64-bit multipliers mixing a colour with its multiset hash: 2^64 / golden ratio (Knuth's multiplicative
# hashing) and xxHash64's PRIME64_2.
_MULT = np.array([0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F], dtype=np.uint64)


def _ids(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(dense id of each value, index of the first of each id)."""
    _, first, ids = np.unique(key, return_index=True, return_inverse=True)
    return ids.ravel().astype(np.int64), first


class _Owners:
    """Entries grouped by owner (a flow class or a column), sorted once."""

    def __init__(self, owner: np.ndarray, num: int) -> None:
        self.order = np.argsort(owner, kind="stable")
        self.bounds = np.flatnonzero(np.diff(owner[self.order], prepend=-1))
        self.who = owner[self.order][self.bounds]
        self.num = num

    def sums(self, colour: np.ndarray, weight: np.ndarray, salt: int) -> np.ndarray:
        """Per owner: a 64-bit hash of the multiset of (colour, weight) of its entries (weights add up)."""
        rng = np.random.default_rng(_SEED + salt)
        table = rng.integers(1, 1 << 63, size=int(colour.max(initial=0)) + 1, dtype=np.uint64)
        out = np.zeros(self.num, dtype=np.uint64)
        if self.bounds.size:
            values = table[colour[self.order]] * weight[self.order]
            out[self.who] = np.add.reduceat(values, self.bounds)
        return out


def _combine(own: np.ndarray, hashed: np.ndarray) -> np.ndarray:
    return own.astype(np.uint64) * _MULT[0] + hashed * _MULT[1]


def colours(batch: FlowBatch, link_kind: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(colour of every flow class, colour of every column): the coarsest equitable partition found by
    refinement from sizes and `link_kind` (one kind per column)."""
    ef, el = batch.entry_class, batch.entry_column
    hops = np.round(batch.entry_hops).astype(np.uint64)
    users = np.round(batch.entry_users).astype(np.uint64)
    flow = _ids(batch.size_bytes)[0]
    link = _ids(np.asarray(link_kind))[0]
    flows, links = _Owners(ef, flow.size), _Owners(el, link.size)
    salt = 0
    with np.errstate(over="ignore"):
        while True:
            salt += 2
            new_flow = _ids(_combine(flow, flows.sums(link[el], hops, salt)))[0]
            new_link = _ids(_combine(link, links.sums(new_flow[ef], users, salt + 1)))[0]
            if new_flow.max(initial=0) == flow.max(initial=0) and new_link.max(initial=0) == link.max(initial=0):
                return flow, link
            flow, link = new_flow, new_link


def _common(group: np.ndarray, values: np.ndarray, count: np.ndarray, expected: np.ndarray
            ) -> np.ndarray | None:
    """Each group's value when all its `count` members share it and it has `expected` members, else None."""
    lo, hi = np.full(count.size, np.inf), np.full(count.size, -np.inf)
    np.minimum.at(lo, group, values)
    np.maximum.at(hi, group, values)
    if np.array_equal(count, expected) and np.allclose(lo, hi, rtol=1e-12, atol=0):
        return lo
    return None


def quotient(batch: FlowBatch, link_kind: np.ndarray) -> FlowBatch:
    """The batch folded by `colours`: one class per flow colour, one column per link colour. A colouring that
    fails the equitable check (a hash collision) returns `batch` unfolded."""
    if not batch.entry_class.size:
        return batch
    flow, link = colours(batch, link_kind)
    nf, nl = int(flow.max(initial=-1)) + 1, int(link.max(initial=-1)) + 1
    flow_size, link_size = np.bincount(flow, minlength=nf), np.bincount(link, minlength=nl)
    ef, el = batch.entry_class, batch.entry_column
    pair, first = _ids(flow[ef] * nl + link[el])  # (flow colour, link colour) of each entry
    num_pairs = int(pair.max()) + 1
    # link side: flows of colour F on each link, the same on every link of its colour
    per_link, at = _ids(el * nf + flow[ef])
    group = pair[at]
    users = _common(group, np.bincount(per_link, weights=batch.entry_users),
                    np.bincount(group, minlength=num_pairs), link_size[link[el[first]]])
    # flow side: links of colour O on each flow's route, the same for every flow of its colour
    per_flow, at = _ids(ef * nl + link[el])
    group = pair[at]
    hops = _common(group, np.bincount(per_flow, weights=batch.entry_hops),
                   np.bincount(group, minlength=num_pairs), flow_size[flow[ef[first]]])
    if users is None or hops is None:
        return batch
    return FlowBatch(entry_class=flow[ef[first]], entry_column=link[el[first]], entry_hops=hops,
                     entry_users=users, column_link=batch.column_link[_ids(link)[1]],
                     size_bytes=batch.size_bytes[_ids(flow)[1]],
                     num_flows=np.bincount(flow, weights=batch.num_flows, minlength=nf))

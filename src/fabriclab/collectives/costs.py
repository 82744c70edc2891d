"""Closed-form costs of every algorithm in the Hockney alpha-beta-gamma model.

A message of n bytes costs alpha + n*beta; reducing n bytes costs n*gamma (Thakur, Rabenseifner &
Gropp, IJHPCA 2005). The formulas follow the schedules of this package step by step on a non-blocking
network where a rank sends and receives at once and several messages into (or out of) one rank share
its link. With P ranks, S bytes, p' = the largest power of two <= P, rem = P - p':

* ring allreduce: 2(P-1) alpha + 2(P-1)/P S beta + (P-1)/P S gamma                 (exact)
* butterfly allreduce: 2 log2(p') alpha + 2(p'-1)/p' S beta + (p'-1)/p' S gamma,
  plus 2 alpha + 2 S beta + S gamma for the fold and unfold when rem > 0             (exact)
* recursive doubling: log2(p') (alpha + S beta + S gamma), same fold term            (exact)
* binomial reduce / broadcast with n chunks: n ceil(log2 P) (alpha + S/n beta [+ S/n gamma])
  (exact for n = 1, the T(Bin) = log P * t(b) of Awan et al.)
* chain reduce / broadcast with n chunks: (n + P - 2)(alpha + S/n beta [+ S/n gamma]) (Awan et al.'s
  T(CC); exact)
* direct: 2 alpha + 2(P-1)/P S beta + (P-1)/P S gamma                                (exact)
* parameter server with s servers: 2 alpha + 2(P-1)/s S beta + (P-1)/s S gamma       (exact)
* double binary tree: (H + D + n - 1) alpha, with H the height and D the depth of the taller tree,
  plus the busiest rank's bytes at beta (an estimate)
* hierarchical: lower reduce on groups of g + upper allreduce on ceil(P/g) leaders + lower broadcast

Try it: `python -c "from fabriclab.collectives.costs import cost; print(cost('allreduce', 'ring', 8, 2**30, 1e-6, 1/4e9, 0))"`.
"""

from __future__ import annotations

import math

from fabriclab.collectives import recursive, trees
from fabriclab.collectives.registry import parse_spec
from fabriclab.collectives.schedule import ALLGATHER, ALLREDUCE, BROADCAST, REDUCE, REDUCE_SCATTER


def _pow2(p: int) -> tuple[int, int]:
    p2 = 1 << (p.bit_length() - 1)
    return p2, p - p2


def _fold(p: int, s: float, a: float, b: float, c: float) -> float:
    return 0.0 if _pow2(p)[1] == 0 else 2 * a + 2 * s * b + s * c


def ring_reduce_scatter(p, s, a, b, c):
    return (p - 1) * (a + s / p * (b + c))


def ring_allgather(p, s, a, b, c):
    return (p - 1) * (a + s / p * b)


def ring_allreduce(p, s, a, b, c):
    return ring_reduce_scatter(p, s, a, b, c) + ring_allgather(p, s, a, b, c)


def _gather(p, s, a, b):
    return 0.0 if p < 2 else a + (p - 1) / p * s * b


def butterfly_allreduce(p, s, a, b, c):
    p2, _ = _pow2(p)
    k = p2.bit_length() - 1
    frac = (p2 - 1) / p2 * s
    return 2 * k * a + 2 * frac * b + frac * c + _fold(p, s, a, b, c)


def recursive_doubling_allreduce(p, s, a, b, c):
    k = _pow2(p)[0].bit_length() - 1
    return k * (a + s * b + s * c) + _fold(p, s, a, b, c)


def _halving(p, s, a, b, c):
    p2, rem = _pow2(p)
    k = p2.bit_length() - 1
    fold = (a + s * (b + c)) if rem else 0.0
    return fold + k * a + (p2 - 1) / p2 * s * (b + c), p2, rem


def butterfly_reduce(p, s, a, b, c):
    t, p2, rem = _halving(p, s, a, b, c)
    return t + (0.0 if p < 2 else a + (s if rem else (p2 - 1) / p2 * s) * b)


def butterfly_broadcast(p, s, a, b, c):
    p2, rem = _pow2(p)
    k = p2.bit_length() - 1
    scatter = 0.0 if p < 2 else a + (s if rem else (p2 - 1) / p2 * s) * b
    return scatter + k * a + (p2 - 1) / p2 * s * b + (a + s * b if rem > 1 else 0.0)


def binomial_reduce(p, s, a, b, c, chunks=1):
    return chunks * math.ceil(math.log2(p)) * (a + s / chunks * (b + c)) if p > 1 else 0.0


def binomial_broadcast(p, s, a, b, c, chunks=1):
    return chunks * math.ceil(math.log2(p)) * (a + s / chunks * b) if p > 1 else 0.0


def chain_reduce(p, s, a, b, c, chunks=4):
    return (chunks + p - 2) * (a + s / chunks * (b + c)) if p > 1 else 0.0


def chain_broadcast(p, s, a, b, c, chunks=4):
    return (chunks + p - 2) * (a + s / chunks * b) if p > 1 else 0.0


def direct_allreduce(p, s, a, b, c):
    return 0.0 if p < 2 else 2 * a + (p - 1) / p * s * (2 * b + c)


def parameter_server_allreduce(p, s, a, b, c, servers=1):
    return 0.0 if p < 2 else 2 * a + (p - 1) / servers * s * (2 * b + c)


def double_binary_tree_allreduce(p, s, a, b, c, chunks=4):
    """Estimate: one alpha per pipeline slot, and the bytes of the busiest rank (or of the slots,
    whichever is larger) at beta; each reduce happens once per received chunk."""
    if p < 2:
        return 0.0
    slots, sent = 0, [0.0] * p
    for parents in trees.dtree_parents(p):
        depth = [0] * p
        for v in range(p):
            u = v
            while parents[u] >= 0:
                u, depth[v] = parents[u], depth[v] + 1
            if parents[v] >= 0:
                # Half the buffer goes up from v and comes down from its parent.
                sent[v] += s / 2
                sent[parents[v]] += s / 2
        # The root's height equals the deepest node's depth: up, then down, plus the pipeline.
        slots = max(slots, 2 * max(depth) + chunks - 1)
    return slots * a + max(max(sent), slots * s / (2 * chunks)) * b + s * c


REDUCE_COSTS = {"chain": chain_reduce, "binomial": binomial_reduce,
                "ring": lambda p, s, a, b, c, chunks=1: ring_reduce_scatter(p, s, a, b, c) + _gather(p, s, a, b),
                "butterfly": lambda p, s, a, b, c, chunks=1: butterfly_reduce(p, s, a, b, c)}
BROADCAST_COSTS = {"chain": chain_broadcast, "binomial": binomial_broadcast,
                   "ring": lambda p, s, a, b, c, chunks=1: _gather(p, s, a, b) + ring_allgather(p, s, a, b, c),
                   "butterfly": lambda p, s, a, b, c, chunks=1: butterfly_broadcast(p, s, a, b, c)}
ALLREDUCE_COSTS = {
    "chain": lambda p, s, a, b, c, chunks=4: chain_reduce(p, s, a, b, c, chunks) + chain_broadcast(p, s, a, b, c, chunks),
    "binomial": lambda p, s, a, b, c, chunks=1: binomial_reduce(p, s, a, b, c, chunks) + binomial_broadcast(p, s, a, b, c, chunks),
    "ring": lambda p, s, a, b, c, chunks=1: ring_allreduce(p, s, a, b, c),
    "butterfly": lambda p, s, a, b, c, chunks=1: butterfly_allreduce(p, s, a, b, c),
}


def direct_reduce_scatter(p, s, a, b, c):
    return a + (p - 1) / p * s * (b + c)


def direct_allgather(p, s, a, b, c):
    return a + (p - 1) / p * s * b


def _owned_steps(p: int, s: float) -> list[float]:
    """Largest bytes any member moves in each halving step under the reduce_scatter block layout
    (new ranks below rem own two blocks, so halves are uneven when P is not a power of two)."""
    p2, rem = _pow2(p)
    sizes = [(2 if j < rem else 1) * s / p for j in range(p2)]
    masks = recursive._masks(p2, recursive.FAR)
    out = []
    for j in range(len(masks)):
        worst = 0.0
        for n in range(p2):
            base, size = recursive._held(n, masks, p2, j)
            half = size // 2
            worst = max(worst, sum(sizes[base:base + half]), sum(sizes[base + half:base + size]))
        out.append(worst)
    return out


def halving_reduce_scatter(p, s, a, b, c):
    """Fold, halving on the block layout, and the odd ranks hand the even ranks' blocks back."""
    _, rem = _pow2(p)
    steps = _owned_steps(p, s)
    fold = (a + s * (b + c)) + (a + s / p * b) if rem else 0.0
    return fold + sum(a + x * (b + c) for x in steps)


def doubling_allgather(p, s, a, b, c):
    """Fold of one block, doubling on the block layout, unfold of the whole buffer."""
    _, rem = _pow2(p)
    steps = _owned_steps(p, s)
    extra = (a + s / p * b) + (a + s * b) if rem else 0.0
    return extra + sum(a + x * b for x in steps)


def hierarchical(collective, p, s, a, b, c, lower="chain", upper="binomial", group=4, chunks=4):
    g = min(group, p)
    leaders = math.ceil(p / g)
    if collective == REDUCE:
        return REDUCE_COSTS[lower](g, s, a, b, c, chunks) + REDUCE_COSTS[upper](leaders, s, a, b, c, chunks)
    if collective == BROADCAST:
        return BROADCAST_COSTS[upper](leaders, s, a, b, c, chunks) + BROADCAST_COSTS[lower](g, s, a, b, c, chunks)
    return (REDUCE_COSTS[lower](g, s, a, b, c, chunks) + ALLREDUCE_COSTS[upper](leaders, s, a, b, c, chunks)
            + BROADCAST_COSTS[lower](g, s, a, b, c, chunks))


def cost(collective: str, algo: str, num_ranks: int, size_bytes: float, alpha_s: float,
         beta_s_per_byte: float, gamma_s_per_byte: float = 0.0) -> float:
    """Predicted seconds for `algo` (a spec string) performing `collective` on `size_bytes`."""
    spec, params = parse_spec(collective, algo, num_ranks)
    p, s, a, b, c = num_ranks, size_bytes, alpha_s, beta_s_per_byte, gamma_s_per_byte
    if p < 2:
        return 0.0
    name = spec.name
    if name == "hierarchical":
        return hierarchical(collective, p, s, a, b, c, **params)
    kwargs = {k: v for k, v in params.items() if k in ("chunks", "servers")}
    table = {
        ALLREDUCE: {"ring": ring_allreduce, "butterfly": butterfly_allreduce,
                    "recursive-doubling": recursive_doubling_allreduce, "direct": direct_allreduce,
                    "parameter-server": parameter_server_allreduce,
                    "double-binary-tree": double_binary_tree_allreduce,
                    "chain": ALLREDUCE_COSTS["chain"], "binomial": ALLREDUCE_COSTS["binomial"]},
        REDUCE: REDUCE_COSTS,
        BROADCAST: BROADCAST_COSTS,
        REDUCE_SCATTER: {"ring": ring_reduce_scatter, "direct": direct_reduce_scatter,
                         "recursive": halving_reduce_scatter},
        ALLGATHER: {"ring": ring_allgather, "direct": direct_allgather, "recursive": doubling_allgather},
    }[collective]
    return table[name](p, s, a, b, c, **kwargs)

"""Array forms of the lock-step algorithms, for simulating thousands of ranks.

A `Schedule` of a ring allreduce on 2048 ranks has 16.8 million operations, too many Python objects
to build quickly. For the algorithms whose every round has the same shape, this module produces the
same transfers directly as numpy arrays, one round at a time. A test checks, for many rank counts and
sizes, that they are exactly the transfers that the matching `Schedule` yields, so the algorithm is
still defined once (by its schedule) and this is only a faster way of writing it out.

Each round is a tuple of arrays `(src, dst, elements, reduce, src_step, dst_step)`.

Try it: `fabriclab bench sim`.
"""

from __future__ import annotations

from typing import Iterator

import numpy as np

from fabriclab.collectives.direct import server_positions
from fabriclab.collectives.recursive import FAR, NEAR
from fabriclab.collectives.registry import parse_spec
from fabriclab.collectives.schedule import ALLREDUCE, split_counts

Round = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def _ring(p: int, count: int) -> Iterator[Round]:
    blocks = np.asarray(split_counts(count, p), dtype=np.int64)
    src = np.arange(p, dtype=np.int64)
    dst = (src + 1) % p
    for s in range(2 * (p - 1)):
        if s < p - 1:
            elements, reduce = blocks[(src - s - 1) % p], True
        else:
            elements, reduce = blocks[(src - (s - p + 1)) % p], False
        steps = np.full(p, s, dtype=np.int64)
        yield src, dst, elements, np.full(p, reduce), steps, steps


def _parameter_server(p: int, count: int, servers: int) -> Iterator[Round]:
    shards = np.asarray(split_counts(count, servers), dtype=np.int64)
    owner = np.asarray(server_positions(p, servers), dtype=np.int64)
    worker = np.repeat(np.arange(p, dtype=np.int64), servers)
    shard = np.tile(np.arange(servers, dtype=np.int64), p)
    keep = worker != owner[shard]
    worker, shard = worker[keep], shard[keep]
    zeros, ones = np.zeros(worker.size, dtype=np.int64), np.ones(worker.size, dtype=np.int64)
    yield worker, owner[shard], shards[shard], np.ones(worker.size, dtype=bool), zeros, zeros
    yield owner[shard], worker, shards[shard], np.zeros(worker.size, dtype=bool), ones, ones


def _butterfly(p: int, count: int, order: str, whole: bool) -> Iterator[Round]:
    """`recursive.butterfly_allreduce` (halving, then doubling, in `order`) or, with `whole`,
    `recursive.recursive_doubling_allreduce`: fold, log2(p') rounds each way, unfold (module doc of
    `recursive.py`). Member n of the p' = 2^L that stay in is rank 2n+1 for n < rem, else n + rem."""
    p2 = 1 << (p.bit_length() - 1)
    rem = p - p2
    n = np.arange(p2, dtype=np.int64)
    member = np.where(n < rem, 2 * n + 1, n + rem)
    shift = (n < rem).astype(np.int64)  # members that received a fold first are one step later
    masks = [1 << i for i in range(p2.bit_length() - 1)]
    if order == FAR and not whole:
        masks = masks[::-1]
    depth = len(masks)
    pairs = 2 * np.arange(rem, dtype=np.int64)
    whole_buffer = np.full(p2, count, dtype=np.int64)
    if rem:
        zeros = np.zeros(rem, dtype=np.int64)
        yield pairs, pairs + 1, np.full(rem, count, dtype=np.int64), np.ones(rem, dtype=bool), zeros, zeros
    starts = np.concatenate(([0], np.cumsum(split_counts(count, p2)))).astype(np.int64)
    base = [np.zeros(p2, dtype=np.int64)]  # first group each member holds after j halving steps
    for j, m in enumerate(masks):
        base.append(base[-1] + np.where(n & m, p2 >> (j + 1), 0))

    def span(first: np.ndarray, num: int) -> np.ndarray:
        return starts[first + num] - starts[first]

    rounds_ = []
    if whole:
        rounds_ = [(m, whole_buffer, True) for m in masks]
    else:
        for j, m in enumerate(masks):
            half = p2 >> (j + 1)
            rounds_.append((m, np.where(n & m, span(base[j], half), span(base[j] + half, half)), True))
        for j in reversed(range(depth)):
            rounds_.append((masks[j], span(base[j + 1], p2 >> (j + 1)), False))
    for k, (m, elements, reduce) in enumerate(rounds_):
        partner = n ^ m
        yield member, member[partner], elements, np.full(p2, reduce), shift + k, shift[partner] + k
    if rem:
        done = np.full(rem, 1 + len(rounds_), dtype=np.int64)
        yield pairs + 1, pairs, np.full(rem, count, dtype=np.int64), np.zeros(rem, dtype=bool), done, \
            np.ones(rem, dtype=np.int64)


def rounds(collective: str, algo: str, num_ranks: int, count: int) -> Iterator[Round] | None:
    """Rounds of `algo` as arrays, or None when there is no array form for this case (then build the
    `Schedule`). Only cases where no chunk is empty have one, since a schedule drops empty chunks."""
    spec, params = parse_spec(collective, algo, num_ranks)
    if collective != ALLREDUCE or num_ranks < 2:
        return None
    if spec.name == "ring" and count >= num_ranks:
        return _ring(num_ranks, count)
    if spec.name in ("butterfly", "recursive-doubling") and count >= 1 << (num_ranks.bit_length() - 1):
        return _butterfly(num_ranks, count, params.get("order", NEAR), spec.name == "recursive-doubling")
    if spec.name == "parameter-server" and count >= params["servers"]:
        return _parameter_server(num_ranks, count, int(params["servers"]))
    return None

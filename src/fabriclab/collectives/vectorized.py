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


def rounds(collective: str, algo: str, num_ranks: int, count: int) -> Iterator[Round] | None:
    """Rounds of `algo` as arrays, or None when there is no array form for this case (then build the
    `Schedule`). Only cases where no chunk is empty have one, since a schedule drops empty chunks."""
    spec, params = parse_spec(collective, algo, num_ranks)
    if collective != ALLREDUCE or num_ranks < 2:
        return None
    if spec.name == "ring" and count >= num_ranks:
        return _ring(num_ranks, count)
    if spec.name == "parameter-server" and count >= params["servers"]:
        return _parameter_server(num_ranks, count, int(params["servers"]))
    return None

"""Direct (all-to-all) algorithms and the sharded parameter server.

* Direct allreduce: every rank sends block j straight to rank j, which reduces it (a one-step
  reduce-scatter), then every rank sends its reduced block to all others (a one-step allgather).
  This is the "reduce-scatter to all, then allgather" pattern of Horovod's and BytePS's
  all-to-all schemes; it needs P-1 simultaneous connections per rank.
* Parameter server with `num_servers` servers holding shards (Li et al., OSDI 2014): every worker
  pushes shard k to server k, servers reduce, then send the reduced shard back to every worker.
  Servers are spread evenly over the ranks (server k is member floor(k*P/num_servers)) and also act as
  workers; Zhang, Li, Tanimura, Nakada uses P/8 servers.

Try it: `fabriclab collectives show --algo ps:servers=2 --ranks 4`.
"""

from __future__ import annotations

from fabriclab.collectives.schedule import Builder, split_range


def _exchange(b: Builder, ranks: list[int], owners: list[int], pieces: list[tuple[int, int]],
              reduce: bool) -> None:
    """One step: piece k goes from every member to `owners[k]` (reduce) or from it to all (copy).

    Member i talks to its peers in the order i+1, i+2, ... so that not everyone starts with the
    same owner; the work is O(P * owners), not O(P^2), so thousands of ranks stay cheap."""
    g = len(ranks)
    steps = {r: b.step(r) for r in ranks}
    mine: dict[int, list[int]] = {}
    for k, owner in enumerate(owners):
        mine.setdefault(owner, []).append(k)
    for i, r in enumerate(ranks):
        for owner in sorted((o for o in mine if o != i), key=lambda o: (o - i) % g):
            for k in mine[owner]:
                if reduce:
                    steps[r].send(ranks[owner], pieces[k])
                else:
                    steps[r].recv_copy(ranks[owner], pieces[k])
    for owner, ks in mine.items():
        for d in range(1, g):
            peer = ranks[(owner - d) % g]
            for k in ks:
                if reduce:
                    steps[ranks[owner]].recv_reduce(peer, pieces[k])
                else:
                    steps[ranks[owner]].send(peer, pieces[k])


def direct_reduce_scatter(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Every member sends block j to member j, which reduces all of them: one step."""
    _exchange(b, ranks, list(range(len(ranks))), split_range(*rng, len(ranks)), reduce=True)


def direct_allgather(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Every member sends its block to every other member: one step."""
    _exchange(b, ranks, list(range(len(ranks))), split_range(*rng, len(ranks)), reduce=False)


def direct_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int]) -> None:
    """Direct reduce-scatter followed by direct allgather: two steps, 2(P-1)/P of the buffer each way."""
    direct_reduce_scatter(b, ranks, rng)
    direct_allgather(b, ranks, rng)


def server_positions(num_ranks: int, num_servers: int) -> list[int]:
    """Servers spread evenly over the members: server k is member floor(k * P / num_servers)."""
    return [k * num_ranks // num_servers for k in range(num_servers)]


def parameter_server_allreduce(b: Builder, ranks: list[int], rng: tuple[int, int],
                               num_servers: int = 1) -> None:
    """Workers push shard k to server k, servers reduce, then send the reduced shard to every worker."""
    owners = server_positions(len(ranks), num_servers)
    shards = split_range(*rng, num_servers)
    _exchange(b, ranks, owners, shards, reduce=True)
    _exchange(b, ranks, owners, shards, reduce=False)

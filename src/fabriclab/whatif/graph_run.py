"""An imported step (rank graphs from a Chakra trace, or any `RankGraph`s) on a cluster: cost its
communication with the cluster's library model, then time every rank's critical path.

A comm op whose duration is 0 (not yet costed; `recost=True`: every comm op) costs what
`nccl.predict.collective_times(cluster, n, [size], collective)` predicts, with n the op's group size
(else its communicator's group in the graph, else `num_gpus`); send and recv cost NCCL's `sendrecv`
between two GPUs: n = 2 when the peer sits in the same server, else two servers' worth (2 x GPUs per
server), ranks filling servers in order. A barrier costs a 4-byte all-reduce (a one-element tensor, as
torch.distributed's NCCL barrier does); a group of 1 and an empty buffer cost 0 s. Costs are kept per
(collective, n, bytes), one model call per (collective, n) for all its sizes.

Approximations, said where they matter: the library model assumes the group's GPUs fill whole servers
(packed, as nccl-tests under mpirun places them). A group smaller than a server is costed inside one
server, even when its GPUs sit one per server (a data-parallel group under tensor parallelism crosses the
network; the model here then underestimates it); a group larger than a server that does not fill whole
servers is rounded up to whole servers (noted in the result). Ranks are timed independently: a recv does
not wait for its matching send on the other rank, and groups do not wait for their slowest member, so
the step is the slowest rank's own critical path.

Try it: `fabriclab chakra example --out /tmp/demo && fabriclab chakra run /tmp/demo --cluster dgx-h100`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.nccl.predict import collective_times
from fabriclab.workload.chakra import BARRIER_BYTES
from fabriclab.workload.graph import STREAMS, Op, RankGraph, topological


@dataclass(frozen=True, kw_only=True)
class RankTime:
    """One rank's step with the costed communication."""

    rank: int
    step_s: float
    """Its critical path."""
    compute_s: float
    """Time when at least one compute op runs."""
    comm_s: dict[str, float]
    """Communicator -> summed time of its ops (overlapping or not)."""
    exposed_comm_s: float
    """Time when communication runs and no compute does."""


@dataclass(frozen=True, kw_only=True)
class GraphRunResult:
    """The step of all ranks: the slowest rank's times, every rank's, and the costed graphs."""

    step_s: float
    """The slowest rank's critical path."""
    slowest_rank: int
    compute_s: float
    """The slowest rank's compute time."""
    comm_s: dict[str, float]
    """The slowest rank's time per communicator."""
    exposed_comm_s: float
    """The slowest rank's communication not hidden behind compute."""
    ranks: tuple[RankTime, ...]
    graphs: list[RankGraph]
    """The graphs with every comm op's duration as costed."""
    num_costed: int
    """Comm ops whose time came from the cluster model."""
    notes: tuple[str, ...] = ()
    """Approximations made (groups rounded up to whole servers)."""
    costs: dict[tuple[str, int, int], float] = field(default_factory=dict)
    """(collective, GPUs, bytes) -> seconds, each cost the model gave."""


def run_graphs(graphs: list[RankGraph], cluster: ClusterModel, *, num_gpus: int | None = None,
               recost: bool = False, cache: dict | None = None) -> GraphRunResult:
    """Cost the communication of `graphs` on `cluster` and time every rank (see the module docstring).
    `num_gpus`: the job's GPUs, for comm ops with no group size (default: the graphs' rank count);
    `cache`: (collective, GPUs, bytes) -> seconds, kept across calls on the same cluster."""
    if not graphs:
        raise ValueError("run_graphs: no rank graphs; give at least one")
    num_gpus = num_gpus or max(g.num_ranks for g in graphs)
    if num_gpus < 1:
        raise ValueError(f"run_graphs: num_gpus {num_gpus}: give at least 1")
    gps = cluster.server.gpus_per_server
    notes: dict[str, None] = {}
    wanted: dict[int, tuple[str, int, int]] = {}  # id(op) -> cost key
    for g in graphs:
        for op in g.ops:
            if op.kind == "comm" and (recost or op.duration_s == 0):
                wanted[id(op)] = _cost_key(op, g, num_gpus, gps, notes)
    costs = {} if cache is None else cache
    _fill_costs(cluster, set(wanted.values()) - set(costs), costs)
    costed = [_costed(g, wanted, costs) for g in graphs]
    ranks = tuple(rank_time(g) for g in costed)
    slowest = max(ranks, key=lambda r: (r.step_s, -r.rank))
    return GraphRunResult(step_s=slowest.step_s, slowest_rank=slowest.rank, compute_s=slowest.compute_s,
                          comm_s=slowest.comm_s, exposed_comm_s=slowest.exposed_comm_s, ranks=ranks,
                          graphs=costed, num_costed=len(wanted), notes=tuple(notes),
                          costs={k: costs[k] for k in set(wanted.values())})


def _cost_key(op: Op, graph: RankGraph, num_gpus: int, gps: int, notes: dict) -> tuple[str, int, int]:
    """(collective as the library model names it, GPUs, bytes) of a comm op."""
    if op.collective in ("send", "recv"):
        same_server = op.peer >= 0 and op.peer // gps == graph.rank // gps
        return "sendrecv", 2 if same_server else 2 * gps, int(op.size_bytes)
    n = op.group_size or len((graph.communicators or {}).get(op.communicator, ())) or num_gpus
    if n > gps and n % gps:
        whole = -(-n // gps) * gps
        notes[f"{op.communicator or 'a'} group of {n} GPUs costed as {whole} (whole servers of {gps})"] = None
        n = whole
    if op.collective == "barrier":
        return "allreduce", n, BARRIER_BYTES
    return op.collective, n, int(op.size_bytes)


def _fill_costs(cluster: ClusterModel, keys: set[tuple[str, int, int]], costs: dict) -> None:
    """Add the cost of every key, one library-model call per (collective, GPUs)."""
    sizes: dict[tuple[str, int], set[int]] = {}
    for collective, n, size in keys:
        if n <= 1 or size <= 0:
            costs[(collective, n, size)] = 0.0  # one rank, or nothing to move (NCCL returns at once)
        else:
            sizes.setdefault((collective, n), set()).add(size)
    for (collective, n), group in sorted(sizes.items()):
        ordered = sorted(group)
        times, _ = collective_times(cluster, n, ordered, collective)
        costs.update({(collective, n, s): float(t) for s, t in zip(ordered, times)})


def _costed(graph: RankGraph, wanted: dict, costs: dict) -> RankGraph:
    if not any(id(op) in wanted for op in graph.ops):
        return graph
    ops = tuple(replace(op, duration_s=costs[wanted[id(op)]]) if id(op) in wanted else op for op in graph.ops)
    return replace(graph, ops=ops)


def schedule(graph: RankGraph) -> dict[int, tuple[float, float]]:
    """Op id -> (start, end): as `RankGraph.critical_path_s` times them (each op starts when its
    dependencies and the previous op of its stream have ended, in topological order)."""
    out: dict[int, tuple[float, float]] = {}
    stream_end = {s: 0.0 for s in STREAMS}
    for op in topological(graph.ops):
        start = max([stream_end[op.stream], *(out[d][1] for d in op.deps)])
        out[op.id] = (start, start + op.duration_s)
        stream_end[op.stream] = start + op.duration_s
    return out


def rank_time(graph: RankGraph) -> RankTime:
    """One rank's step, compute time, time per communicator and exposed communication."""
    times = schedule(graph)
    comm: dict[str, float] = {}
    for op in graph.ops:
        if op.kind == "comm":
            comm[op.communicator] = comm.get(op.communicator, 0.0) + op.duration_s
    compute = _covered([times[op.id] for op in graph.ops if op.kind == "compute"])
    busy = _covered(list(times.values()))
    return RankTime(rank=graph.rank, step_s=max((e for _, e in times.values()), default=0.0), compute_s=compute,
                    comm_s=comm, exposed_comm_s=max(busy - compute, 0.0))


def _covered(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of the intervals."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


# The most ranks of the example: every rank's graph lists the world group, so the example and its files grow
# as ranks^2; measured here, 1,024 ranks take 2 s and 90 MB to write, 8,192 took 58 s and 2.6 GB.
MAX_SAMPLE_RANKS = 1024


def sample_graphs(num_ranks: int = 4) -> list[RankGraph]:
    """A small step with every op kind and every collective ASTRA-sim runs, to try the Chakra reader and
    writer and this runner: two pipeline stages of ranks (`pp`: send/recv between rank r and r + num_ranks / 2), ranks in pairs
    (`tp`) and `world` collectives; the communication is left uncosted (0 s)."""
    if num_ranks < 4 or num_ranks % 2 or num_ranks > MAX_SAMPLE_RANKS:
        raise ValueError(f"--ranks {num_ranks}: give an even number from 4 to {MAX_SAMPLE_RANKS:,} (the example grows "
                         f"as ranks^2: each rank's file lists the world group)")
    half = num_ranks // 2
    return [_sample_rank(r, num_ranks, r + half if r < half else r - half) for r in range(num_ranks)]


def _sample_rank(r: int, num_ranks: int, peer: int) -> RankGraph:
    first = r < num_ranks // 2
    comm = dict(kind="comm", stream="comm")

    def p2p(i: int, name: str, collective: str, deps: tuple[int, ...]) -> Op:
        return Op(id=i, name=name, collective=collective, communicator="pp", size_bytes=8 << 20, group_size=2,
                  peer=peer, deps=deps, **comm)

    ops = [Op(id=0, name="embed.fwd", kind="compute", flops=1.5e12 + 0.25, duration_s=1.2345678e-3),
           p2p(1, "pp.send.act" if first else "pp.recv.act", "send" if first else "recv", (0,)),
           Op(id=2, name="layer.fwd", kind="compute", flops=4e12, duration_s=2.5e-3, deps=(1,))]
    ops += [Op(id=i, name=f"tp.{c}", collective=c, communicator="tp", size_bytes=16 << 20, group_size=2,
               deps=(2,), **comm) for i, c in enumerate(("allreduce", "allgather", "reduce_scatter"), start=3)]
    ops += [Op(id=6, name="layer.bwd", kind="compute", flops=8e12, duration_s=5e-3, deps=(2,)),
            p2p(7, "pp.recv.grad" if first else "pp.send.grad", "recv" if first else "send", (6,))]
    # only collectives ASTRA-sim runs (it stops at reduce and barrier), so that the example runs there too
    ops += [Op(id=i, name=f"world.{c}", collective=c, communicator="world", size_bytes=size, group_size=num_ranks,
               deps=(7,), **comm)
            for i, (c, size) in enumerate((("alltoall", 4 << 20), ("broadcast", 1 << 20), ("allreduce", 1 << 20),
                                           ("allgather", 2 << 20)), start=8)]
    ops.append(Op(id=12, name="optimizer", kind="compute", flops=1e9, duration_s=2e-4, deps=(3, 4, 5, 11)))
    tp = [r - r % 2, r - r % 2 + 1]
    return RankGraph(rank=r, num_ranks=num_ranks, ops=tuple(ops),
                     communicators={"tp": tp, "pp": sorted([r, peer]), "world": list(range(num_ranks))})

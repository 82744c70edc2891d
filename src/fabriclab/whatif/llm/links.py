"""The busiest links of a simulated LLM step: every stage's traffic of one step, all groups at once,
routed on the whole cluster.

The step model (`whatif/llm/step.py`) costs each communicator's collectives on the shape of one group; it
does not say which cables of the real network carry the step. This module does: for every stage, every
collective of its step program (`whatif/llm/program.py`: communicator, collective, bytes per call, calls
per step), the groups of that communicator on that stage's ranks send their bytes along the routes of the cluster's
topology (`fabric/rail.py`: NVLink through the NVSwitch, PCIe to the NIC, NIC to leaf, leaf to spine, with
PXN and D-mod-K as there), and the bytes add up per directed link. A link's busy time is its bytes over its
rate (the NIC's payload rate for network links); its share of the step says how close the step runs it to
saturation, averaged over the step.

What each GPU sends per call (nccl-tests' buffer convention, size S, group of n):
* all-gather and reduce-scatter: (n - 1)/n x S to the next rank of its ring; all-reduce 2 (n - 1)/n x S;
  split over the library's channels, each a ring of the group's servers in order that leaves every
  server from another GPU (and so, on a rail-optimised network, through another NIC), as NCCL's rings do;
* all-to-all: S/n to every other rank of the group;
* pipeline messages: S from each rank of the stage to the rank of the stage the program sends to
  (activations forward, gradients backward, with virtual stages also between the last and the first);
* CP ring steps: S to the next rank of the CP ring.
A tree algorithm is costed as its ring here: the same bytes per GPU, on neighbour pairs; the busiest link
of a tree differs little (every GPU sends and receives about S either way), its spread over spines does.

Try it: `fabriclab whatif llm --model llama3-70b --gpus 1024 --tp 8 --pp 4` (the table "busiest links").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabriclab.nccl.links import cluster_topology, job_endpoints
from fabriclab.whatif.llm.groups import communicator_groups
from fabriclab.whatif.llm.program import stage_calls
from fabriclab.workload.parallel import ParallelConfig

KINDS = ("NVLink", "PCIe", "NIC-leaf", "leaf-spine")
ROUTE_BATCH = 1 << 15  # pairs routed at once
FLUSH_ENTRIES = 1 << 23  # route entries (link, bytes) counted onto the links at once: 128 MB of them
NEAR = 0.99  # links this close to the busiest of their kind count as equally busy


@dataclass(frozen=True, kw_only=True)
class LinkLoad:
    """One directed link's traffic in one step."""

    link: str
    """Its two ends, e.g. `s3.nic2->leaf2`."""
    kind: str
    """`NVLink`, `PCIe` (GPU to NIC), `NIC-leaf` or `leaf-spine` (either direction)."""
    bandwidth_Bps: float
    bytes_per_step: float
    busy_s: float
    """bytes_per_step / bandwidth_Bps."""
    share_of_step: float
    """busy_s / the step time."""
    num_as_busy: int
    """Links of its kind that carry at least `NEAR` of its bytes-time (itself included)."""
    by: dict[str, float]
    """Communicator -> its bytes on the link."""


def traffic(groups: np.ndarray, collective: str, size_bytes: float, calls: float, *, gpus_per_server: int,
            num_channels: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sources, destinations, bytes) of `calls` collectives of `size_bytes` on every group (module doc);
    pipeline messages and CP ring steps are routed by `stage_traffic`, which knows their peers."""
    n = groups.shape[1]
    if n == 1 or size_bytes <= 0 or calls <= 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    if collective == "alltoall":
        a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        keep = a != b
        src, dst = groups[:, a[keep]].ravel(), groups[:, b[keep]].ravel()
        return src, dst, np.full(src.size, size_bytes / n * calls)
    factor = {"allgather": 1.0, "reduce_scatter": 1.0, "allreduce": 2.0}.get(collective)
    if factor is None:
        raise ValueError(f"collective {collective!r}: no traffic pattern for it here")
    rings = channel_rings(groups, gpus_per_server, num_channels)
    src, dst = rings.ravel(), np.roll(rings, -1, axis=2).ravel()
    return src, dst, np.full(src.size, factor * (n - 1) / n * size_bytes * calls / rings.shape[0])


def channel_rings(groups: np.ndarray, gpus_per_server: int, num_channels: int) -> np.ndarray:
    """(channels, groups, n) the rings NCCL builds for every group: the group's servers in order and inside
    each its GPUs from the c-th on (`nccl/links.py`'s rings), so channel c leaves a server from one GPU and
    enters the next at another, and the channels spread the crossings over the servers' NICs. Groups that
    do not hold the same number of GPUs in each of their servers get one ring in rank order."""
    ranks = np.sort(groups, axis=1)
    servers = ranks // gpus_per_server
    per = int(np.unique(servers[0], return_counts=True)[1].max())
    if num_channels <= 1 or per == 1 or ranks.shape[1] % per or (servers[:, ::per].repeat(per, 1) != servers).any():
        return ranks[None]
    c = np.arange(num_channels)[:, None, None]
    local = (np.arange(ranks.shape[1]) // per) * per + (c + np.arange(ranks.shape[1]) % per) % per
    return np.take_along_axis(np.broadcast_to(ranks, (num_channels, *ranks.shape)),
                              np.broadcast_to(local, (num_channels, ranks.shape[0], ranks.shape[1])), axis=2)


def _node_kinds(topology) -> np.ndarray:
    """0 NVSwitch, 1 GPU, NIC or root complex, 2 leaf, 3 spine, for every node: from `fabric/rail.py`'s
    numbering (GPUs, each server's hub and NICs, leaves, spines) when it built the topology, else the names."""
    r = getattr(topology, "router", None)
    if r is not None and all(hasattr(r, k) for k in ("S", "G", "K", "hub", "nvswitch", "num_leaves", "num_spines")):
        per_server = np.ones(r.hub + r.K, dtype=np.int64)
        if r.hub and r.nvswitch:
            per_server[0] = 0
        return np.concatenate((np.ones(r.S * r.G, dtype=np.int64), np.tile(per_server, r.S),
                               np.full(r.num_leaves, 2), np.full(r.num_spines, 3)))

    def node_kind(name: str) -> int:
        tail = name.rsplit(".", 1)[-1]
        return 3 if tail.startswith("spine") else 2 if tail.startswith("leaf") else 0 if tail == "nvsw" else 1

    return np.array([node_kind(n) for n in topology.node_names], dtype=np.int64)


def _link_kinds(topology) -> np.ndarray:
    """Index into KINDS of every link, from the kinds of its two ends (an end touching a spine, a leaf,
    an NVSwitch, else PCIe)."""
    nodes = _node_kinds(topology)
    ends = np.stack([nodes[topology.link_src], nodes[topology.link_dst]])
    return np.where((ends == 3).any(0), 3, np.where((ends == 2).any(0), 2, np.where((ends == 0).any(0), 0, 1)))


def stage_traffic(answer, stage: int, gpus_per_server: int, num_channels: int, memo: dict | None = None):
    """(communicator, sources, destinations, bytes) of one stage's program: its collectives on the groups
    of its ranks, its pipeline messages to the ranks of the stages it sends to, its CP ring steps to the
    next rank of each CP ring. `memo`: communicator -> its groups (and "stage_of": each rank's stage), shared
    by the stages of one step."""
    par, program = answer.par, answer.result.program
    shard = answer.result.model.options.shard_group
    memo = {} if memo is None else memo

    def groups_of(name: str) -> np.ndarray:
        if name not in memo:
            memo[name] = communicator_groups(par, name, shard, gpus_per_server)
        return memo[name]

    merged: dict[tuple, float] = {}
    for call, count in stage_calls(program, stage):
        # the pipeline's messages go to the stage each names, below; activation offloading stays on its GPU
        if call.communicator not in ("pp", "host"):
            key = (call.communicator, call.collective, call.size_bytes)
            merged[key] = merged.get(key, 0.0) + count
    for send in program.sends.get(stage, ()):
        src, dst = groups_of("pp")[:, stage], groups_of("pp")[:, send.peer_stage]
        yield "pp", src, dst, np.full(src.size, send.call.size_bytes * send.count)
    for (name, collective, size), calls in merged.items():
        if "stage_of" not in memo:
            memo["stage_of"] = par.coordinates()["pp"]
        groups = groups_of(name)
        groups = groups[memo["stage_of"][groups[:, 0]] == stage]
        if collective == "sendrecv":  # a CP ring step: to the next rank of the ring
            src, dst = groups.ravel(), np.roll(groups, -1, axis=1).ravel()
            yield name, src, dst, np.full(src.size, size * calls)
            continue
        yield (name, *traffic(groups, collective, size, calls, gpus_per_server=gpus_per_server,
                              num_channels=num_channels))


def link_loads(answer):
    """(the cluster's topology, communicator -> bytes per step on every directed link) of a simulated step:
    every stage's program routed on the whole cluster."""
    par: ParallelConfig = answer.par
    topology = cluster_topology(answer.cluster, par.num_gpus)
    g, channels = answer.cluster.server.gpus_per_server, answer.cluster.library.num_channels
    loads: dict[str, np.ndarray] = {}
    memo: dict[str, np.ndarray] = {}
    for stage in range(par.pp):
        for name, src, dst, size in stage_traffic(answer, stage, g, channels, memo):
            if src.size == 0:
                continue
            load = loads.setdefault(name, np.zeros(topology.num_links))
            pending: list = []
            for lo in range(0, src.size, ROUTE_BATCH):  # in batches: the routes of 16,384 GPUs' rings are large
                part = slice(lo, lo + ROUTE_BATCH)
                offsets, hops = topology.routes(job_endpoints(answer.cluster, par.num_gpus, src[part]),
                                                job_endpoints(answer.cluster, par.num_gpus, dst[part]))
                pending.append((hops, np.repeat(size[part], np.diff(offsets))))
                if sum(h.size for h, _ in pending) >= FLUSH_ENTRIES or lo + ROUTE_BATCH >= src.size:
                    # one count over many batches: a count per batch costs a pass over every link
                    hops, weights = (np.concatenate(x) for x in zip(*pending))
                    load += np.bincount(hops, weights=weights, minlength=topology.num_links)
                    pending = []
    return topology, loads


def busiest_links(answer) -> list[LinkLoad]:
    """The busiest link of each kind in the step, busiest first (module doc)."""
    topology, loads = link_loads(answer)
    if not loads:
        return []
    total = sum(loads.values())
    busy = total / topology.bandwidth_Bps
    kinds = _link_kinds(topology)
    rows = []
    for k, kind in enumerate(KINDS):  # the busiest link of each kind, and how many run as busy
        of_kind = np.flatnonzero((kinds == k) & (busy > 0))
        if of_kind.size == 0:
            continue
        i = int(of_kind[np.argmax(busy[of_kind])])
        rows.append(LinkLoad(link=topology.link_name(i), kind=kind, bandwidth_Bps=float(topology.bandwidth_Bps[i]),
                             bytes_per_step=float(total[i]), busy_s=float(busy[i]),
                             share_of_step=float(busy[i] / answer.step_time_s),
                             num_as_busy=int((busy[of_kind] >= NEAR * busy[i]).sum()),
                             by={c: float(v[i]) for c, v in sorted(loads.items()) if v[i] > 0}))
    return sorted(rows, key=lambda r: -r.busy_s)

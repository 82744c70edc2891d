"""One collective on one network, as `fabriclab simulate collective` asks it: checks, run, link load.

`CollectiveRequest` holds the question in numbers (the topology's `TopologySpec`, the algorithm, the
size); `run_collective` checks it against this machine before any work (ranks, size, messages), builds
the topology, places the ranks, simulates the schedule and returns a `CollectiveAnswer` with what a
reader asks next: algbw and busbw (nccl-tests' definitions, `collectives.schedule.BUS_FACTORS`), each
link's bytes and utilisation, the busiest links.

Try it: `fabriclab simulate collective --algo ring --topology fat-tree --hosts 64 --bisection 1/4`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from fabriclab.collectives.schedule import bus_bandwidth_factor
from fabriclab.sim.collective import SimResult, simulate
from fabriclab.sim.limits import check_inputs, check_simulation


@dataclass(frozen=True, kw_only=True)
class CollectiveRequest:
    """One simulation, in numbers."""

    collective: str
    algo: str
    topology: object
    """A `fabric.scenario.TopologySpec`."""
    size_bytes: int
    itemsize: int = 4
    gamma_s_per_byte: float = 0.0
    num_ranks: int | None = None
    """Ranks; None: every endpoint."""
    placement: str = "linear"
    engine: str = "auto"
    top: int = 5
    """How many of the busiest links to report."""


@dataclass(frozen=True, kw_only=True)
class CollectiveAnswer:
    """The simulation and the load it put on the links."""

    request: CollectiveRequest
    topology: object
    num_ranks: int
    result: SimResult
    wall_s: float
    algbw_Bps: float | None
    busbw_Bps: float | None
    utilisation: np.ndarray
    busiest: np.ndarray
    """Indices of the busiest links, busiest first."""

    def busiest_links(self) -> list[dict]:
        return [{"link": self.topology.link_name(int(i)), "bytes": float(self.result.link_bytes[i]),
                 "utilisation": float(self.utilisation[i])} for i in self.busiest]


def num_ranks_of(request: CollectiveRequest) -> int:
    endpoints = request.topology.num_hosts * request.topology.gpus_per_server
    if request.num_ranks is not None and request.num_ranks > endpoints:
        raise ValueError(f"--ranks {request.num_ranks}: the topology has {endpoints} endpoints; give at most that, "
                         f"or more --hosts")
    return endpoints if request.num_ranks is None else request.num_ranks


def run_collective(request: CollectiveRequest) -> CollectiveAnswer:
    """Check, build, place, simulate; a ValueError says what to change before any work is done."""
    from fabriclab.fabric.placement import place
    from fabriclab.fabric.scenario import build_topology

    num_ranks = num_ranks_of(request)
    check_inputs(request.size_bytes, request.itemsize, request.gamma_s_per_byte)
    check_simulation(request.collective, request.algo, num_ranks, request.size_bytes // request.itemsize,
                     request.engine)
    topo = build_topology(request.topology)
    where = place(num_ranks, topo, request.placement, request.topology.seed)
    t0 = time.perf_counter()
    result = simulate(request.collective, request.algo, topo, num_ranks, request.size_bytes, placement=where,
                      itemsize=request.itemsize, gamma_s_per_byte=request.gamma_s_per_byte, engine=request.engine)
    wall_s = time.perf_counter() - t0
    algbw = request.size_bytes / result.time_s if result.time_s > 0 else None
    busbw = algbw * bus_bandwidth_factor(request.collective, num_ranks) if algbw is not None else None
    busy_s = topo.bandwidth_Bps * result.time_s
    util = result.link_bytes / busy_s if result.time_s > 0 else result.link_bytes * 0.0
    return CollectiveAnswer(request=request, topology=topo, num_ranks=num_ranks, result=result, wall_s=wall_s,
                            algbw_Bps=algbw, busbw_Bps=busbw, utilisation=util,
                            busiest=busiest(result.link_bytes, request.top))


def busiest(link_bytes: np.ndarray, top: int) -> np.ndarray:
    """Indices of the `top` busiest links, busiest first (ties: lowest id), without sorting them all."""
    if top >= link_bytes.size:
        return np.argsort(-link_bytes, kind="stable")
    cut = np.argpartition(-link_bytes, top - 1)[:top] if top else np.zeros(0, dtype=np.int64)
    threshold = link_bytes[cut].min(initial=np.inf)
    candidates = np.flatnonzero(link_bytes >= threshold)
    return candidates[np.argsort(-link_bytes[candidates], kind="stable")][:top]


def message_rows(result: SimResult) -> list[dict]:
    """One row per message: ranks, bytes, start and finish (the general engine's detail)."""
    d = result.detail
    if d is None:
        raise ValueError("--ops-csv needs per-message times: add --engine general")
    return [{"src_rank": int(d.transfers.src[i]), "dst_rank": int(d.transfers.dst[i]),
             "src_step": int(d.transfers.src_step[i]), "dst_step": int(d.transfers.dst_step[i]),
             "elements": int(d.transfers.elements[i]), "reduce": bool(d.transfers.reduce[i]),
             "start_s": float(d.transfer_start_s[i]), "finish_s": float(d.transfer_finish_s[i])}
            for i in range(d.transfers.src.size)]

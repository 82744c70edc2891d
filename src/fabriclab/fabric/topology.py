"""A topology: endpoints, host-internal nodes, switches and directed links, plus a routing function.

This is the object the simulator (`fabriclab.sim`) consumes. Nodes are numbered endpoints first
(0..num_endpoints-1; endpoint e lives on host e // gpus_per_server), then host-internal nodes (PCIe and
NVLink switches), then switches. Links are directed (a full-duplex cable is two links) with a bandwidth in
bytes per second and a latency in seconds each. `route(src, dst)` gives the link ids from endpoint src
to endpoint dst in order; `routes()` gives many at once in CSR form, fast for the structured topologies
(fat tree, leaf-spine, star, ring, torus, flattened butterfly build one with numpy arithmetic).

A topology built by hand (no `router`) routes by minimum hop count (BFS, lowest link id on ties).

Try it: `python -c "from fabriclab.fabric import fat_tree; t = fat_tree(hosts=512, bisection=0.25);
print(t, [t.link_name(l) for l in t.route(0, 511)])"`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from fabriclab.fabric.routing import ShortestPathRouter

# Pairs whose single-pair routes `route()` keeps; beyond it the cache is cleared and refilled.
_ROUTE_CACHE_SIZE = 1 << 16


class Router(Protocol):
    """Computes routes between endpoints of one topology, vectorized."""

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """CSR (offsets of len n+1, link ids) for endpoint pairs (src[i], dst[i]); () when equal."""
        ...


@dataclass(frozen=True, kw_only=True, eq=False)
class Topology:
    """Nodes, directed links with bandwidth and latency, and the routes between endpoints."""

    name: str
    """What was built, e.g. `fat-tree(levels=2,hosts=512,hosts_per_leaf=16,bisection=1/4)`."""
    num_hosts: int
    """Machines; each has `gpus_per_server` endpoints and shares one NIC among them."""
    gpus_per_server: int = 1
    """Ranks / endpoints per host; endpoint e lives on host e // gpus_per_server."""
    node_names: tuple[str, ...]
    """Name of every node: endpoints first, then host-internal nodes, then switches."""
    link_src: np.ndarray
    """int64 source node of each directed link."""
    link_dst: np.ndarray
    """int64 destination node of each directed link."""
    bandwidth_Bps: np.ndarray
    """float64 bandwidth of each directed link, bytes per second."""
    latency_s: np.ndarray
    """float64 latency of each directed link, seconds."""
    router: Router | None = None
    """Computes routes; None means minimum-hop routes by BFS (fine for small hand-built topologies)."""
    _route_cache: dict = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        arrays = {"link_src": np.int64, "link_dst": np.int64, "bandwidth_Bps": np.float64,
                  "latency_s": np.float64}
        for attr, dtype in arrays.items():
            value = np.array(getattr(self, attr), dtype=dtype).ravel()
            value.setflags(write=False)
            object.__setattr__(self, attr, value)
        object.__setattr__(self, "node_names", tuple(self.node_names))
        self._check()
        if self.router is None:
            object.__setattr__(self, "router", ShortestPathRouter(self.link_src, self.link_dst,
                                                                  len(self.node_names)))

    def _check(self) -> None:
        if self.num_hosts < 1 or self.gpus_per_server < 1:
            raise ValueError(f"topology {self.name!r} has {self.num_hosts} hosts with {self.gpus_per_server} "
                             f"GPUs each: give at least one host with at least one GPU")
        if len(self.node_names) < self.num_endpoints:
            raise ValueError(f"topology {self.name!r} names {len(self.node_names)} nodes but has "
                             f"{self.num_endpoints} endpoints: name every endpoint first")
        n = self.link_src.size
        if not self.link_dst.size == self.bandwidth_Bps.size == self.latency_s.size == n:
            raise ValueError(f"topology {self.name!r}: link_src, link_dst, bandwidth_Bps and latency_s "
                             f"must have one entry per link")
        for ends in (self.link_src, self.link_dst):
            if n and (ends.min() < 0 or ends.max() >= len(self.node_names)):
                raise ValueError(f"topology {self.name!r}: link ends must be node ids in "
                                 f"0..{len(self.node_names) - 1}")
        bad = np.flatnonzero(~(self.bandwidth_Bps > 0))
        if bad.size:
            raise ValueError(f"link {self.link_name(int(bad[0]))} of {self.name!r} has bandwidth "
                             f"{self.bandwidth_Bps[bad[0]]} B/s: give every link a bandwidth > 0")
        bad = np.flatnonzero(~(self.latency_s >= 0))
        if bad.size:
            raise ValueError(f"link {self.link_name(int(bad[0]))} of {self.name!r} has latency "
                             f"{self.latency_s[bad[0]]} s: give every link a latency >= 0")

    def __repr__(self) -> str:
        return (f"Topology({self.name!r}: {self.num_endpoints} endpoints on {self.num_hosts} hosts, "
                f"{len(self.node_names)} nodes, {self.num_links} links)")

    @property
    def num_endpoints(self) -> int:
        """Endpoints (ranks can be placed on them): num_hosts * gpus_per_server."""
        return self.num_hosts * self.gpus_per_server

    @property
    def num_links(self) -> int:
        """Directed links."""
        return int(self.link_src.size)

    @property
    def num_nodes(self) -> int:
        """Endpoints, host-internal nodes and switches."""
        return len(self.node_names)

    def host_of(self, endpoint: int) -> int:
        """The host an endpoint lives on."""
        return int(endpoint) // self.gpus_per_server

    def link_name(self, link: int) -> str:
        """`'h3->leaf0'`: the names of the link's two ends."""
        return f"{self.node_names[self.link_src[link]]}->{self.node_names[self.link_dst[link]]}"

    def _endpoints(self, values, what: str) -> np.ndarray:
        array = np.asarray(values)
        if array.dtype.kind not in "iu" and array.size:
            raise ValueError(f"{what} endpoints must be integers, got {array.dtype}")
        array = array.astype(np.int64, copy=False).ravel()
        if array.size and (array.min() < 0 or array.max() >= self.num_endpoints):
            bad = array[(array < 0) | (array >= self.num_endpoints)][0]
            raise ValueError(f"{what} endpoint {bad} is not in {self.name!r}: endpoints are "
                             f"0..{self.num_endpoints - 1}")
        return array

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Routes of many endpoint pairs: (offsets of len n+1, link ids); pair i has
        `links[offsets[i]:offsets[i+1]]`, in order from src[i] to dst[i] (empty when they are equal)."""
        src, dst = self._endpoints(src, "source"), self._endpoints(dst, "destination")
        if src.size != dst.size:
            raise ValueError(f"routes() needs as many sources as destinations, got {src.size} and {dst.size}")
        return self.router.routes(src, dst)

    def route(self, src: int, dst: int) -> tuple[int, ...]:
        """Directed link ids from endpoint src to endpoint dst, in order; () when src == dst."""
        key = (int(src), int(dst))
        found = self._route_cache.get(key)
        if found is None:
            _, links = self.routes(np.array([key[0]]), np.array([key[1]]))
            found = tuple(int(link) for link in links)
            if len(self._route_cache) >= _ROUTE_CACHE_SIZE:
                self._route_cache.clear()
            self._route_cache[key] = found
        return found

    def path_latency_s(self, src: int, dst: int) -> float:
        """Sum of the link latencies on the route from src to dst."""
        return float(self.latency_s[list(self.route(src, dst))].sum())

    def path_bandwidth_Bps(self, src: int, dst: int) -> float:
        """Smallest link bandwidth on the route from src to dst (inf when src == dst)."""
        route = list(self.route(src, dst))
        return float(self.bandwidth_Bps[route].min()) if route else float("inf")

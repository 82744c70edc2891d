"""Direct networks (ring, 1-3 dimensional torus) and the flattened butterfly, with vectorized routing.

* `torus(dims=(4, 4))`: a direct network (Blue Gene, TPU pods): every host is a vertex of the torus and
  links to its two neighbours in each dimension (one neighbour in a dimension of size 2, none in size 1).
  Dimension-order routing: dimension 0 first, the shorter way round each ring, the + direction on ties.
  `ring(n)` is `torus(dims=(n,))`.
* `flattened_butterfly(dims=(8, 8), hosts_per_router=8)`: Kim, Dally & Abts, "Flattened Butterfly: A
  Cost-Efficient Topology for High-Radix Networks" (ISCA 2007). Routers form a grid; each links directly
  to every router that differs from it in one coordinate, and serves `hosts_per_router` hosts. Minimal
  dimension-order routing: at most one router-to-router hop per dimension, so the "flat
  butterfly" is at most D+2 links from host to host with full bisection bandwidth.

With gpus_per_server > 1 the torus links join the hosts' PCIe switches (see `hosts.py`).

Try it: `python -c "from fabriclab.fabric import torus; t = torus(dims=(4, 4)); print([t.link_name(l) for l in t.route(0, 10)])"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabriclab.fabric.hosts import HostLinks, NetBuilder, host_model
from fabriclab.fabric.links import DEFAULT_LINK, Link, resolve_link
from fabriclab.fabric.routing import column_part, endpoint_routes, merge_parts
from fabriclab.fabric.topology import Topology


def _dims(dims, *, most: int, what: str) -> tuple[int, ...]:
    dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
    if not 1 <= len(dims) <= most or not all(isinstance(n, (int, np.integer)) and n >= 1 for n in dims):
        raise ValueError(f"dims={dims!r}: give 1 to {most} whole {what} sizes >= 1, e.g. (4, 4)")
    return tuple(int(n) for n in dims)


def _strides(dims: tuple[int, ...]) -> list[int]:
    """Dimension 0 varies fastest: vertex = sum(coord[d] * stride[d])."""
    return [math.prod(dims[:d]) for d in range(len(dims))]


@dataclass(frozen=True, kw_only=True, eq=False)
class TorusRouter:
    """Dimension-order routes on a torus; plus/minus[v, d] is the link from v one step along d."""

    dims: tuple[int, ...]
    """Torus size per dimension."""
    hosts: HostLinks
    """Intra-host link arithmetic."""
    plus: np.ndarray
    """Link id from vertex v to its + neighbour in dimension d (-1 for size-1 dimensions)."""
    minus: np.ndarray
    """Link id from vertex v to its - neighbour in dimension d."""

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = self.hosts.gpus_per_server
        sh, th = src // g, dst // g
        cross = sh != th
        same_host = ~cross & (src != dst)
        parts = [column_part(self.hosts.first_column(src, cross, same_host))] if g > 1 else []
        cur = sh.copy()
        for d, (n, stride) in enumerate(zip(self.dims, _strides(self.dims))):
            sc, tc = (cur // stride) % n, (th // stride) % n
            delta = (tc - sc) % n
            forward = 2 * delta <= n
            hops = np.where(forward, delta, n - delta)
            pair = np.repeat(np.arange(src.size), hops)
            step = np.arange(pair.size) - np.repeat(np.cumsum(hops) - hops, hops)
            coord = (sc[pair] + np.where(forward[pair], step, -step)) % n
            vertex = cur[pair] + (coord - sc[pair]) * stride
            parts.append((hops, np.where(forward[pair], self.plus[vertex, d], self.minus[vertex, d])))
            cur = cur + (tc - sc) * stride
        if g > 1:
            parts.append(column_part(self.hosts.last_column(dst, cross, same_host)))
        return merge_parts(parts, src.size)


def torus(dims=(4, 4), *, link: Link | str = DEFAULT_LINK, link_Bps: float | None = None,
          latency_s: float | None = None, gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16",
          nvlink: Link | str | None = None) -> Topology:
    """A 1-, 2- or 3-dimensional torus of prod(dims) hosts (module doc)."""
    dims = _dims(dims, most=3, what="torus")
    fabric_link = resolve_link(link, link_Bps, latency_s)
    net = NetBuilder(math.prod(dims), host_model(gpus_per_server, pcie, nvlink))
    vertices = np.arange(net.num_hosts)
    plus = np.full((vertices.size, len(dims)), -1, dtype=np.int64)
    minus = plus.copy()
    for d, (n, stride) in enumerate(zip(dims, _strides(dims))):
        if n == 1:
            continue
        coord = (vertices // stride) % n
        owners = vertices[coord == 0] if n == 2 else vertices
        neighbour = owners + (((owners // stride) % n + 1) % n - (owners // stride) % n) * stride
        first = net.add_duplex(net.port(owners), net.port(neighbour), fabric_link)
        ids = first + 2 * np.arange(owners.size)
        plus[owners, d], minus[neighbour, d] = ids, ids + 1
        if n == 2:
            plus[neighbour, d], minus[owners, d] = ids + 1, ids
    shape = "x".join(map(str, dims))
    label = f"ring(hosts={dims[0]}" if len(dims) == 1 else f"torus(dims={shape}"
    label += f",gpus_per_server={gpus_per_server})" if gpus_per_server != 1 else ")"
    router = TorusRouter(dims=dims, hosts=HostLinks.of(net), plus=plus, minus=minus)
    return Topology(name=label, router=router, **net.arrays())


def ring(hosts: int = 8, *, link: Link | str = DEFAULT_LINK, link_Bps: float | None = None,
         latency_s: float | None = None, gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16",
         nvlink: Link | str | None = None) -> Topology:
    """`hosts` hosts in a bidirectional ring, routed the shorter way round."""
    if not isinstance(hosts, (int, np.integer)) or hosts < 1:
        raise ValueError(f"hosts={hosts!r}: give a whole number of hosts >= 1")
    return torus((hosts,), link=link, link_Bps=link_Bps, latency_s=latency_s, gpus_per_server=gpus_per_server,
                 pcie=pcie, nvlink=nvlink)


@dataclass(frozen=True, kw_only=True, eq=False)
class ButterflyRouter:
    """Host -> router, one hop per differing coordinate (dimension order), router -> host."""

    dims: tuple[int, ...]
    """Routers per dimension."""
    hosts_per_router: int
    """Hosts on each router."""
    hosts: HostLinks
    """Intra-host link arithmetic."""
    nic_base: int
    """Id of the first host -> router link (host h: nic_base + 2h, back + 1)."""
    hop: np.ndarray
    """hop[r, d, x]: link id from router r to the router equal to r but with coordinate d = x."""

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return endpoint_routes(self.hosts, src, dst, self._fabric_columns)

    def _fabric_columns(self, hs, ht, cross, src, dst) -> list[np.ndarray]:
        cur, target = hs // self.hosts_per_router, ht // self.hosts_per_router
        columns = [self.nic_base + 2 * hs]
        for d, (n, stride) in enumerate(zip(self.dims, _strides(self.dims))):
            sc, tc = (cur // stride) % n, (target // stride) % n
            columns.append(np.where(sc != tc, self.hop[cur, d, tc], -1))
            cur = cur + (tc - sc) * stride
        return columns + [self.nic_base + 2 * ht + 1]


def flattened_butterfly(*, dims=(8, 8), hosts_per_router: int | None = None, link: Link | str = DEFAULT_LINK,
                        link_Bps: float | None = None, latency_s: float | None = None,
                        gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16",
                        nvlink: Link | str | None = None) -> Topology:
    """A flattened butterfly of prod(dims) routers with `hosts_per_router` hosts each (default dims[0],
    Kim et al.'s k-ary n-flat); every router links to all routers sharing all but one coordinate."""
    dims = _dims(dims, most=4, what="router-grid")
    c = dims[0] if hosts_per_router is None else hosts_per_router
    if not isinstance(c, (int, np.integer)) or c < 1:
        raise ValueError(f"hosts_per_router={hosts_per_router!r}: give a whole number >= 1")
    fabric_link = resolve_link(link, link_Bps, latency_s)
    num_routers = math.prod(dims)
    net = NetBuilder(num_routers * int(c), host_model(gpus_per_server, pcie, nvlink))
    first_router = net.add_nodes([f"sw{r}" for r in range(num_routers)])
    hosts = np.arange(net.num_hosts)
    nic_base = net.add_duplex(net.port(hosts), first_router + hosts // c, fabric_link)
    routers = np.arange(num_routers)
    hop = np.full((num_routers, len(dims), max(dims)), -1, dtype=np.int64)
    for d, (n, stride) in enumerate(zip(dims, _strides(dims))):
        coord = (routers // stride) % n
        for x in range(n):
            low = routers[coord < x]
            high = low + (x - coord[coord < x]) * stride
            ids = net.add_duplex(first_router + low, first_router + high, fabric_link) + 2 * np.arange(low.size)
            hop[low, d, x], hop[high, d, coord[coord < x]] = ids, ids + 1
    shape = "x".join(map(str, dims))
    extra = f",gpus_per_server={gpus_per_server}" if gpus_per_server != 1 else ""
    router = ButterflyRouter(dims=dims, hosts_per_router=int(c), hosts=HostLinks.of(net), nic_base=nic_base,
                             hop=hop)
    return Topology(name=f"flattened-butterfly(dims={shape},hosts_per_router={c}{extra})", router=router,
                    **net.arrays())

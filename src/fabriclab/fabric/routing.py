"""Routes as data: vectorized route assembly, D-mod-K and ECMP port choice, and a shortest-path fallback.

A route is the ordered tuple of directed link ids from one endpoint to another. `Topology.routes()`
answers many pairs at once in CSR form: `offsets` (n+1) and `links`, pair i owning
`links[offsets[i]:offsets[i+1]]`. The structured topologies compute routes with numpy arithmetic on
node and link ids: every router fills a few *columns* (one link id per pair per column, -1 where that
pair skips the column) and `assemble()` drops the -1s row by row, which keeps the links in order.

Port choice on the way up a fat tree (`up_port`):

* **D-mod-K** (default): at level l the up-port is `(d // (w_1 * ... * w_l)) mod w_{l+1}` for destination
  host d, with w_i the up-links per node at level i (Zahavi, "D-Mod-K Routing Providing Non-Blocking
  Traffic for Shift Permutations on Real Life Fat Trees", 2010; the same rule as SimGrid's FatTreeZone).
  Deterministic, and it spreads destinations evenly over the up-links.
* **ECMP**: the up-port is a seeded hash of (source endpoint, destination endpoint) modulo the number of
  up-ports, different per level, as switches hash flow headers. Deterministic for a given seed.

`ShortestPathRouter` serves hand-built topologies without a structured router: BFS per source (cached),
ties broken by the lowest link id, one pair at a time.

Try it: `python -c "from fabriclab.fabric import fat_tree; print(fat_tree(hosts=64).route(0, 63))"`.
"""

from __future__ import annotations

from collections import deque
from typing import Callable

import numpy as np

from fabriclab.fabric.hosts import HostLinks

DMODK = "dmodk"
ECMP = "ecmp"
ROUTINGS = (DMODK, ECMP)

# splitmix64 constants (Steele, Lea & Flood, "Fast splittable pseudorandom number generators", 2014).
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def check_routing(routing: str) -> str:
    """The routing name, or a ValueError listing the known ones."""
    if routing not in ROUTINGS:
        raise ValueError(f"unknown routing {routing!r}: use one of {', '.join(ROUTINGS)}")
    return routing


def _mix(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * _MIX1
        x = (x ^ (x >> np.uint64(27))) * _MIX2
        return x ^ (x >> np.uint64(31))


def flow_hash(src: np.ndarray, dst: np.ndarray, seed: int, salt: int) -> np.ndarray:
    """A 64-bit hash per (src, dst) pair, different for each seed and salt (e.g. the tree level)."""
    with np.errstate(over="ignore"):
        key = np.uint64((seed * 1_000_003 + salt) & 0xFFFFFFFFFFFFFFFF) * _GOLDEN
        h = _mix(np.asarray(src, dtype=np.uint64) ^ key)
        return _mix(h ^ (np.asarray(dst, dtype=np.uint64) * _GOLDEN))


def up_port(routing: str, level: int, dst_host: np.ndarray, stride: int, num_ports: int,
            src: np.ndarray, dst: np.ndarray, seed: int) -> np.ndarray:
    """Up-port index in [0, num_ports) at tree level `level` (stride = w_1 * ... * w_level)."""
    if num_ports == 1:
        return np.zeros_like(dst_host)
    if routing == DMODK:
        return (dst_host // stride) % num_ports
    return (flow_hash(src, dst, seed, level) % np.uint64(num_ports)).astype(np.int64)


def assemble(columns: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR (offsets, links) from route columns of n pairs each; -1 entries are skipped."""
    offsets = np.zeros(n + 1, dtype=np.int64)
    if not columns or n == 0:
        return offsets, np.zeros(0, dtype=np.int64)
    table = np.stack(columns, axis=1)
    present = table >= 0
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    return offsets, table[present]


FabricColumns = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray], list[np.ndarray]]


def endpoint_routes(hosts: HostLinks, src: np.ndarray, dst: np.ndarray,
                    fabric_columns: FabricColumns) -> tuple[np.ndarray, np.ndarray]:
    """Routes between endpoints: intra-host links around the host-to-host columns of the fabric.

    `fabric_columns(src_host, dst_host, cross, src, dst)` returns columns of fabric link ids for the
    pairs with `cross` (different hosts); entries of other pairs are ignored."""
    g = hosts.gpus_per_server
    src_host, dst_host = src // g, dst // g
    cross = src_host != dst_host
    columns = [np.where(cross, col, -1) for col in fabric_columns(src_host, dst_host, cross, src, dst)]
    if g > 1:
        same_host = ~cross & (src != dst)
        columns = [hosts.first_column(src, cross, same_host), *columns,
                   hosts.last_column(dst, cross, same_host)]
    return assemble(columns, src.size)


class ShortestPathRouter:
    """Minimum-hop routes by BFS from each source (cached); ties go to the lowest link id."""

    def __init__(self, link_src: np.ndarray, link_dst: np.ndarray, num_nodes: int) -> None:
        order = np.argsort(link_src, kind="stable")
        self._out_links = order
        self._out_start = np.searchsorted(link_src[order], np.arange(num_nodes + 1))
        self._link_src = link_src
        self._link_dst = link_dst
        self._parents: dict[int, np.ndarray] = {}

    def _tree(self, source: int) -> np.ndarray:
        parents = self._parents.get(source)
        if parents is None:
            parents = np.full(self._out_start.size - 1, -1, dtype=np.int64)
            seen = {source}
            queue = deque([source])
            while queue:
                node = queue.popleft()
                for link in self._out_links[self._out_start[node]:self._out_start[node + 1]]:
                    nxt = int(self._link_dst[link])
                    if nxt not in seen:
                        seen.add(nxt)
                        parents[nxt] = link
                        queue.append(nxt)
            self._parents[source] = parents
        return parents

    def route(self, src: int, dst: int) -> list[int]:
        path: list[int] = []
        parents = self._tree(src)
        node = dst
        while node != src:
            link = int(parents[node])
            if link < 0:
                raise ValueError(f"no path from node {src} to node {dst}: the topology is not connected")
            path.append(link)
            node = int(self._link_src[link])
        return path[::-1]

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        paths = [self.route(int(s), int(d)) for s, d in zip(src, dst)]
        offsets = np.zeros(len(paths) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in paths], out=offsets[1:])
        links = np.fromiter((l for p in paths for l in p), dtype=np.int64, count=int(offsets[-1]))
        return offsets, links


def merge_parts(parts: list[tuple[np.ndarray, np.ndarray]], n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR from route parts: part k gives counts[i] links of pair i (values pair-major); a pair's route
    is its links of part 0, then part 1, ... For routes too long to assemble from columns (rings)."""
    if len(parts) == 1:
        counts, values = parts[0]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        return offsets, values.astype(np.int64, copy=False)
    total = np.zeros(n, dtype=np.int64)
    for counts, _ in parts:
        total += counts
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(total, out=offsets[1:])
    links = np.empty(int(offsets[-1]), dtype=np.int64)
    start = offsets[:-1].copy()
    for counts, values in parts:
        pair = np.repeat(np.arange(n), counts)
        first = np.cumsum(counts) - counts
        links[start[pair] + np.arange(values.size) - first[pair]] = values
        start += counts
    return offsets, links


def column_part(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A route column (-1 = absent) as a part for `merge_parts`."""
    present = column >= 0
    return present.astype(np.int64), column[present]

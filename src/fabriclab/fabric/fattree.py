"""Fat trees (2 or 3 levels, any bisection ratio the radix allows), leaf-spine and star networks.

All three are extended generalized fat trees XGFT(h; m_1..m_h; w_1..w_h) (Ohring et al. 1995, the
model of Zahavi's D-Mod-K and of SimGrid's FAT_TREE clusters): m_l children per switch at level l,
w_l parents per node at level l-1 (hosts are level 0 and have w_1 = 1 NIC). Level l has
prod(m_{l+1..h}) * prod(w_1..w_l) nodes.

**Where the oversubscription goes** (bisection ratio r, hosts_per_leaf k):

* 2 levels: leaves have k down-links and k*r up-links, one to each of k*r spines; each spine has one
  link to every leaf. XGFT(2; k, H/k; 1, k*r). With r = 1 the tree is non-blocking. The leaf uplinks are
  the only oversubscribed stage, so any half/half split of the leaves crosses exactly r * H/2 links.
* 3 levels: pods of `leaves_per_pod` (p) leaves. Leaves are NOT oversubscribed: k down, k up, one to
  each of the pod's k aggregation switches. Aggregation switches have p down-links and p*r up-links:
  aggregation switch j of every pod links to the p*r core switches of core group j. XGFT(3; k, p, H/(k p);
  1, k, p*r). A pod is non-blocking inside; traffic between pods shares r of the full bandwidth.

Both give a bisection bandwidth (half of the pods or leaves against the other half) of r * H/2 links.
Routing is D-mod-K by default (up-port from the destination host's index) or ECMP (seeded hash), see
`routing.py`. A path inside one leaf crosses 2 links, across leaves 4 (2 levels), across pods 6.

Try it: `python -c "from fabriclab.fabric import fat_tree; print(fat_tree(levels=3, hosts=1024, bisection=0.25))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from fabriclab.fabric.hosts import HostLinks, NetBuilder, host_model
from fabriclab.fabric.links import DEFAULT_LINK, Link, resolve_link
from fabriclab.fabric.routing import DMODK, check_routing, endpoint_routes, up_port
from fabriclab.fabric.topology import Topology


@dataclass(frozen=True, kw_only=True)
class FatTreeShape:
    """XGFT parameters of a tree, as SimGrid's FAT_TREE `topo_parameters` spells them."""

    down: tuple[int, ...]
    """m_1..m_h: children (down-links) of each switch at level 1..h."""
    up: tuple[int, ...]
    """w_1..w_h: parents (up-links) of each node at level 0..h-1; w_1 = 1 (one NIC per host)."""

    @property
    def levels(self) -> int:
        return len(self.down)

    def nodes_at(self, level: int) -> int:
        """Number of nodes at a level (0 = hosts)."""
        return math.prod(self.down[level:]) * math.prod(self.up[:level])

    def simgrid_parameters(self) -> str:
        """`levels;m_1,..,m_h;w_1,..,w_h;1,..,1` (one cable between related nodes)."""
        ones = ",".join("1" * self.levels)
        return (f"{self.levels};{','.join(map(str, self.down))};{','.join(map(str, self.up))};{ones}")


@dataclass(frozen=True, kw_only=True)
class FatTreeRouter:
    """Up by D-mod-K or ECMP to the lowest common ancestor, then the one way down."""

    shape: FatTreeShape
    """The tree."""
    hosts: HostLinks
    """Intra-host link arithmetic."""
    level_base: tuple[int, ...]
    """Id of the first up-link from level l to l+1 (level 0: the NIC links)."""
    routing: str = DMODK
    """`dmodk` or `ecmp`."""
    seed: int = 0
    """ECMP hash seed."""

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return endpoint_routes(self.hosts, src, dst, self._fabric_columns)

    def _fabric_columns(self, hs, ht, cross, src, dst) -> list[np.ndarray]:
        m, w, h = self.shape.down, self.shape.up, self.shape.levels
        below = [math.prod(m[:l]) for l in range(h + 1)]     # hosts under one node of level l
        stride = [math.prod(w[:l]) for l in range(h + 1)]    # W_l = w_1 * ... * w_l
        top = np.ones_like(hs)                                # level where the route turns down
        for level in range(1, h):
            top += hs // below[level] != ht // below[level]
        columns, b = [], np.zeros_like(hs)
        for level in range(h):
            active = level < top
            j = up_port(self.routing, level, ht, stride[level], w[level], src, dst, self.seed)
            node = (hs // below[level]) * stride[level] + b
            columns.append(np.where(active, self.level_base[level] + 2 * (node * w[level] + j), -1))
            b = np.where(active, b + stride[level] * j, b)
        for level in range(h, 0, -1):
            active = level <= top
            j, child_b = b // stride[level - 1], b % stride[level - 1]
            node = (ht // below[level - 1]) * stride[level - 1] + child_b
            columns.append(np.where(active, self.level_base[level - 1] + 2 * (node * w[level - 1] + j) + 1, -1))
            b = np.where(active, child_b, b)
        return columns


_LEVEL_NAMES = {1: ("switch",), 2: ("leaf", "spine"), 3: ("leaf", "agg", "core")}


def build_tree(*, name: str, shape: FatTreeShape, links: list[Link], host, routing: str = DMODK,
               seed: int = 0) -> Topology:
    """A Topology for `shape`; links[l] is the link between levels l and l+1 (links[0]: the NICs)."""
    net = NetBuilder(shape.nodes_at(0), host)
    first_switch = {0: None}
    for level in range(1, shape.levels + 1):
        prefix = _LEVEL_NAMES[shape.levels][level - 1]
        first_switch[level] = net.add_nodes([f"{prefix}{x}" for x in range(shape.nodes_at(level))])
    level_base = []
    for level in range(shape.levels):
        w_up, m_up = shape.up[level], shape.down[level]
        stride = math.prod(shape.up[:level])
        x = np.repeat(np.arange(shape.nodes_at(level)), w_up)
        j = np.tile(np.arange(w_up), shape.nodes_at(level))
        parent = (x // stride // m_up) * stride * w_up + x % stride + stride * j
        child = net.port(x) if level == 0 else first_switch[level] + x
        level_base.append(net.add_duplex(child, first_switch[level + 1] + parent, links[level]))
    router = FatTreeRouter(shape=shape, hosts=HostLinks.of(net), level_base=tuple(level_base),
                           routing=check_routing(routing), seed=seed)
    return Topology(name=name, router=router, **net.arrays())


def _ratio(bisection: float | Fraction) -> Fraction:
    if isinstance(bisection, str):
        raise TypeError(f"bisection={bisection!r}: give a number such as Fraction(1, 4) (parse text with "
                        f"fabriclab.units.parse_fraction at the edge)")
    value = float(bisection)
    if not 0 < value <= 1:
        raise ValueError(f"bisection={bisection!r}: give a ratio in (0, 1], e.g. 1, 1/2, 1/4 or 1/16")
    return Fraction(value).limit_denominator(1 << 20)


def _split(hosts: int, group: int, *, per: str, alternatives: str) -> int:
    """hosts // group when whole and >= 2, else a ValueError suggesting nearby values."""
    if hosts % group == 0 and hosts // group >= 2:
        return hosts // group
    lo, hi = max(2 * group, hosts // group * group), max(2 * group, -(-hosts // group) * group)
    counts = " or ".join(str(v) for v in sorted({lo, hi}))
    why = "fill only one of the" if hosts <= group else "do not fill whole"
    raise ValueError(f"{hosts} hosts {why} {per} of {group} hosts: use hosts={counts}{alternatives}")


def _nearest(candidates: list[int], target: int) -> str:
    best = sorted(sorted(candidates, key=lambda d: (abs(d - target), d))[:2])
    return " or ".join(map(str, best))


def _up_links(down: int, ratio: Fraction, *, stage: str, name: str, hosts: int, unit: int) -> int:
    """down * ratio when it is a whole number >= 1, else a ValueError with the nearest valid values."""
    ups = down * ratio
    if ups.denominator == 1 and ups >= 1:
        return int(ups)
    near = sorted({max(1, math.floor(ups)), min(down, max(1, math.ceil(ups)))})
    ratios = " or ".join(f"bisection={Fraction(n, down)}" for n in near)
    fits = [d for d in range(ratio.denominator, 4 * down + ratio.denominator, ratio.denominator)
            if hosts % (d * unit) == 0 and hosts // (d * unit) >= 2]
    alt = f", or {name}={_nearest(fits, down)}" if fits else ""
    raise ValueError(f"bisection={ratio} with {name}={down} gives {float(ups):g} {stage} up-links "
                     f"({name} * bisection must be a whole number >= 1): use {ratios}{alt}")


def fat_tree(*, levels: int = 2, hosts: int, hosts_per_leaf: int = 16, bisection: float | str = 0.25,
             leaves_per_pod: int | None = None, link: Link | str = DEFAULT_LINK,
             link_Bps: float | None = None, latency_s: float | None = None,
             gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16", nvlink: Link | str | None = None,
             routing: str = DMODK, seed: int = 0) -> Topology:
    """A 2- or 3-level fat tree of `hosts` hosts with bisection ratio `bisection` (module doc).

    `leaves_per_pod` (3 levels only) defaults to `hosts_per_leaf`. `link` is a preset name, a plain
    `'4GB/s@0.2us'` or a Link; `link_Bps` / `latency_s` override its bandwidth and per-link latency."""
    if levels not in (2, 3):
        raise ValueError(f"levels={levels!r}: fat_tree builds 2 or 3 levels")
    for key, value in (("hosts", hosts), ("hosts_per_leaf", hosts_per_leaf)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{key}={value!r}: give a whole number >= 1")
    ratio, k = _ratio(bisection), int(hosts_per_leaf)
    host = host_model(gpus_per_server, pcie, nvlink)
    fabric_link = resolve_link(link, link_Bps, latency_s)
    leaves = _split(hosts, k, per="leaves", alternatives=_leaf_sizes(hosts, k))
    label = f"levels={levels},hosts={hosts},hosts_per_leaf={k}"
    if levels == 2:
        spines = _up_links(k, ratio, stage="leaf", name="hosts_per_leaf", hosts=hosts, unit=1)
        shape = FatTreeShape(down=(k, leaves), up=(1, spines))
    else:
        p = k if leaves_per_pod is None else int(leaves_per_pod)
        if p < 1:
            raise ValueError(f"leaves_per_pod={leaves_per_pod!r}: give a whole number >= 1")
        fits = [d for d in range(1, hosts // k + 1) if hosts % (k * d) == 0 and hosts // (k * d) >= 2]
        pods = _split(hosts, k * p, per=f"pods ({p} leaves of {k})",
                      alternatives=f", or leaves_per_pod={_nearest(fits, p)}" if fits else "")
        cores = _up_links(p, ratio, stage="aggregation", name="leaves_per_pod", hosts=hosts, unit=k)
        shape = FatTreeShape(down=(k, p, pods), up=(1, k, cores))
        label += f",leaves_per_pod={p}"
    label += f",bisection={ratio}" + _extras(gpus_per_server, routing, seed)
    return build_tree(name=f"fat-tree({label})", shape=shape, links=[fabric_link] * levels, host=host,
                      routing=routing, seed=seed)


def leaf_spine(*, hosts: int, hosts_per_leaf: int = 16, spines: int = 4, link: Link | str = DEFAULT_LINK,
               link_Bps: float | None = None, latency_s: float | None = None,
               uplink: Link | str | None = None, gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16",
               nvlink: Link | str | None = None, routing: str = DMODK, seed: int = 0) -> Topology:
    """Leaves of `hosts_per_leaf` hosts, each linked once to each of `spines` spines.

    Unlike `fat_tree` the uplinks may be faster than the host links (`uplink`, default `link`), and
    spines may outnumber hosts per leaf; the bisection ratio is spines * uplink / (hosts_per_leaf * link)."""
    if not isinstance(spines, (int, np.integer)) or spines < 1:
        raise ValueError(f"spines={spines!r}: give a whole number of spines >= 1")
    if not isinstance(hosts_per_leaf, (int, np.integer)) or hosts_per_leaf < 1:
        raise ValueError(f"hosts_per_leaf={hosts_per_leaf!r}: give a whole number >= 1")
    host_link = resolve_link(link, link_Bps, latency_s)
    up_link = host_link if uplink is None else resolve_link(uplink)
    leaves = _split(hosts, int(hosts_per_leaf), per="leaves", alternatives=_leaf_sizes(hosts, hosts_per_leaf))
    shape = FatTreeShape(down=(int(hosts_per_leaf), leaves), up=(1, int(spines)))
    label = f"hosts={hosts},hosts_per_leaf={hosts_per_leaf},spines={spines}"
    label += f",uplink={up_link.name}" if uplink is not None else ""
    return build_tree(name=f"leaf-spine({label}{_extras(gpus_per_server, routing, seed)})", shape=shape,
                      links=[host_link, up_link], host=host_model(gpus_per_server, pcie, nvlink),
                      routing=routing, seed=seed)


def star(*, hosts: int, link: Link | str = DEFAULT_LINK, link_Bps: float | None = None,
         latency_s: float | None = None, gpus_per_server: int = 1, pcie: Link | str = "PCIe3x16",
         nvlink: Link | str | None = None) -> Topology:
    """`hosts` hosts on one non-blocking switch: host -> switch -> host, 2 links per path."""
    if not isinstance(hosts, (int, np.integer)) or hosts < 1:
        raise ValueError(f"hosts={hosts!r}: give a whole number of hosts >= 1")
    shape = FatTreeShape(down=(int(hosts),), up=(1,))
    return build_tree(name=f"star(hosts={hosts}{_extras(gpus_per_server, DMODK, 0)})", shape=shape,
                      links=[resolve_link(link, link_Bps, latency_s)],
                      host=host_model(gpus_per_server, pcie, nvlink))


def _leaf_sizes(hosts: int, k: int) -> str:
    fits = [d for d in range(1, hosts // 2 + 1) if hosts % d == 0]
    return f", or hosts_per_leaf={_nearest(fits, k)}" if fits else ""


def _extras(gpus_per_server: int, routing: str, seed: int) -> str:
    out = f",gpus_per_server={gpus_per_server}" if gpus_per_server != 1 else ""
    if routing != DMODK:
        out += f",routing={routing},seed={seed}"
    return out

"""One description of a network in numbers, as the CLI and the sweeps give it, turned into a `Topology`.

A `TopologySpec` holds numbers only (bandwidth in bytes/s, latency in s, the bisection ratio as a
`Fraction`): the units users type are parsed at the edge (`fabriclab.cli.options`), and a link preset is
resolved there too (`link` keeps its name for titles and records). The spec checks its values and
the size of what it describes before anything is built, so a typo such as `--hosts 100000000` is one
clear error instead of a machine out of memory.

Torus and flattened butterfly take their shape from `dims`; without `dims` they are shaped from `hosts`
(a torus as square as `hosts` allows, a k-ary flattened butterfly when `hosts` is k^2 or k^3).

Try it: `fabriclab simulate collective --topology fat-tree --hosts 512 --bisection 1/4 --link 4GB/s`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace
from fractions import Fraction

from fabriclab.fabric.fattree import fat_tree, leaf_spine, star
from fabriclab.fabric.links import Link, plain_link
from fabriclab.fabric.routing import ROUTINGS
from fabriclab.fabric.topology import Topology

KINDS = ("star", "fat-tree", "leaf-spine", "ring", "torus", "flattened-butterfly")

# A topology costs about 350 bytes per host and 40 per directed link (arrays, node names, routing
# tables; measured: a 524288-host fat tree peaks at 200 MB). These limits keep the largest network
# around 1 GB, well inside this machine's 24 GiB, and far above the 2048 hosts of the papers' studies.
MAX_ENDPOINTS = 1 << 20
MAX_LINKS = 1 << 24
MAX_GPUS_PER_SERVER = 64

# Zhang, Li, Tanimura, Nakada ("How Much Should We Invest for Network Facility"): 4 GB/s links and
# 0.2 us per switch in their base case; the default of every command that simulates a network.
DEFAULT_BANDWIDTH_BPS = 4e9
DEFAULT_LATENCY_S = 0.2e-6
LEAF_HOSTS = 16  # their leaf switches serve 16 hosts


@dataclass(frozen=True, kw_only=True)
class TopologySpec:
    """Everything that picks a topology, in base units; fields a kind does not use are ignored by it."""

    kind: str = "fat-tree"
    """One of star, fat-tree, leaf-spine, ring, torus, flattened-butterfly."""
    hosts: int = 8
    """Number of hosts (set from `dims` when given: torus prod(dims), flattened butterfly
    prod(dims) * dims[0])."""
    levels: int = 2
    """Fat-tree levels, 2 or 3."""
    hosts_per_leaf: int = 4
    """Hosts under one leaf switch (fat tree, leaf-spine)."""
    bisection: Fraction = Fraction(1)
    """Fat-tree bisection ratio in (0, 1], e.g. Fraction(1, 4)."""
    leaves_per_pod: int | None = None
    """3-level fat trees: leaves per pod (default hosts_per_leaf)."""
    spines: int = 4
    """Leaf-spine: number of spines."""
    dims: tuple[int, ...] | None = None
    """Torus and flattened butterfly dimensions; None: shaped from `hosts` (module docstring)."""
    bandwidth_Bps: float = DEFAULT_BANDWIDTH_BPS
    """Bandwidth of every fabric link per direction, bytes per second."""
    latency_s: float = DEFAULT_LATENCY_S
    """Latency of every fabric link (one hop), seconds."""
    link: str | None = None
    """Name of the link preset the numbers came from (e.g. 25GbE), for titles and records; None: plain."""
    gpus_per_server: int = 1
    """Ranks per host; they share the host's intra-node links and NIC."""
    routing: str = "dmodk"
    """Fat-tree routing: dmodk (deterministic D-mod-K) or ecmp (seeded hash)."""
    seed: int = 0
    """Seed of ECMP hashing."""
    shape: tuple[int, ...] = field(default=(), init=False, compare=False, repr=False)
    """The resolved dims of a torus or flattened butterfly (set by the checks)."""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown topology {self.kind!r}: use one of {', '.join(KINDS)}")
        _whole("hosts", self.hosts, 1)
        _whole("GPUs per server", self.gpus_per_server, 1, MAX_GPUS_PER_SERVER)
        _whole("hosts per leaf", self.hosts_per_leaf, 1)
        _whole("spines", self.spines, 1)
        _whole("levels", self.levels, 2, 3)
        if self.leaves_per_pod is not None:
            _whole("leaves per pod", self.leaves_per_pod, 1)
        if isinstance(self.bisection, str):
            raise TypeError("bisection must be a number (Fraction); parse text with fabriclab.units.parse_ratio")
        ratio = Fraction(self.bisection).limit_denominator(1 << 20)
        if not 0 < ratio <= 1:
            raise ValueError(f"bisection {self.bisection}: give a ratio in (0, 1], e.g. 1, 1/2, 1/4")
        object.__setattr__(self, "bisection", ratio)
        for name, value, low in (("bandwidth", self.bandwidth_Bps, "> 0"), ("latency", self.latency_s, ">= 0")):
            if isinstance(value, str) or isinstance(value, bool):
                raise TypeError(f"{name} must be a number; parse text with fabriclab.units")
            if not math.isfinite(value) or not (value > 0 if low == "> 0" else value >= 0):
                raise ValueError(f"{name} {value:g}: give a finite value {low}, e.g. 4GB/s and 0.2us")
        if self.routing not in ROUTINGS:
            raise ValueError(f"routing {self.routing!r}: use one of {', '.join(ROUTINGS)}")
        self._check_endpoints(self.hosts)
        object.__setattr__(self, "shape", self._shape())
        if self.shape:  # torus, flattened butterfly: the hosts follow from the dims
            object.__setattr__(self, "hosts", self.num_hosts)
        self._check_endpoints(self.num_hosts)
        links = self._links_estimate()
        if links > MAX_LINKS:
            raise ValueError(f"{self.kind} with dims {'x'.join(map(str, self.shape))} has about {links} links: "
                             f"at most {MAX_LINKS} fit this machine's 24 GiB; give smaller --dims")

    def _check_endpoints(self, hosts: int) -> None:
        endpoints = hosts * self.gpus_per_server
        if endpoints > MAX_ENDPOINTS:
            per = f" x {self.gpus_per_server} GPUs = {endpoints} endpoints" if self.gpus_per_server > 1 else ""
            raise ValueError(f"{hosts} hosts{per}: at most {MAX_ENDPOINTS} endpoints fit this machine's 24 GiB "
                             f"(about 350 bytes each); give fewer hosts")

    @property
    def num_hosts(self) -> int:
        """Hosts of the topology (for torus and flattened butterfly: from the resolved dims)."""
        if self.kind == "torus":
            return math.prod(self.shape)
        if self.kind == "flattened-butterfly":
            return math.prod(self.shape) * self.shape[0]
        return self.hosts

    def _shape(self) -> tuple[int, ...]:
        if self.kind not in ("torus", "flattened-butterfly"):
            return ()
        most = 3 if self.kind == "torus" else 4
        if self.dims is None:
            return _torus_dims(self.hosts) if self.kind == "torus" else _butterfly_dims(self.hosts)
        dims = tuple(self.dims)
        if not 1 <= len(dims) <= most or not all(isinstance(n, int) and n >= 1 for n in dims):
            raise ValueError(f"dims {dims}: give 1 to {most} whole sizes >= 1, e.g. 4x4")
        if max(dims) > MAX_ENDPOINTS:
            raise ValueError(f"dims {'x'.join(map(str, dims))}: at most {MAX_ENDPOINTS} per dimension")
        return dims

    def _links_estimate(self) -> int:
        if self.kind == "flattened-butterfly":
            routers = math.prod(self.shape)
            return 2 * (self.num_hosts + routers * sum(n - 1 for n in self.shape))
        return 8 * self.num_hosts * self.gpus_per_server  # trees, rings, tori: a few links per host

    def link_object(self) -> Link:
        """The fabric link of this spec, named after its preset when it came from one."""
        if self.link:
            return Link(name=self.link, bandwidth_Bps=float(self.bandwidth_Bps), latency_s=float(self.latency_s))
        return plain_link(float(self.bandwidth_Bps), float(self.latency_s))

    def as_dict(self) -> dict:
        """JSON-ready fields (bisection as text like `1/4`); `from_dict` reads it back."""
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.init}
        out["bisection"] = str(self.bisection)
        out["dims"] = None if self.dims is None else list(self.dims)
        return out

    @classmethod
    def from_dict(cls, data: dict) -> TopologySpec:
        """The spec `as_dict` wrote; a ValueError names a field that is missing or wrong."""
        known = {f.name for f in fields(cls) if f.init}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"topology spec has unknown fields {sorted(unknown)}")
        values = dict(data)
        try:
            values["bisection"] = Fraction(str(values.get("bisection", 1)))
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"topology spec bisection {data.get('bisection')!r} is not a ratio") from None
        if values.get("dims") is not None:
            values["dims"] = tuple(values["dims"])
        return cls(**values)

    def with_hosts(self, hosts: int) -> TopologySpec:
        """The same network with `hosts` hosts (torus and flattened butterfly reshaped from it)."""
        return replace(self, hosts=hosts, dims=None if self.kind in ("torus", "flattened-butterfly") else self.dims)


def auto_hosts_per_leaf(hosts: int, bisection: Fraction = Fraction(1), levels: int = 2) -> int:
    """The leaf size when none is given: 16 hosts (Zhang et al.'s leaves), or for fewer hosts the largest
    that still makes two leaves (two pods of square ones for 3 levels) with whole up-links at `bisection`."""
    ratio = Fraction(bisection).limit_denominator(1 << 20)
    for k in range(min(LEAF_HOSTS, hosts // 2), 0, -1):
        group = k if levels == 2 else k * k
        if hosts % group == 0 and hosts // group >= 2 and (k * ratio).denominator == 1:
            return k
    return max(min(LEAF_HOSTS, hosts // 2), 1)  # none fits: `fat_tree` then says what would


def _whole(what: str, value, low: int, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        limit = f"{low}..{high}" if high is not None else f">= {low}"
        raise ValueError(f"{what} {value!r}: give a whole number {limit}")


def _torus_dims(hosts: int) -> tuple[int, ...]:
    """The squarest 2-D torus of `hosts` hosts (a ring when `hosts` is prime)."""
    a = max(d for d in range(1, math.isqrt(hosts) + 1) if hosts % d == 0)
    return (hosts,) if a == 1 else (a, hosts // a)


def _butterfly_dims(hosts: int) -> tuple[int, ...]:
    """A k-ary flattened butterfly (k hosts per router): k x k routers for k^3 hosts, k for k^2."""
    for rank in (3, 2):
        k = round(hosts ** (1 / rank))
        for c in (k - 1, k, k + 1):
            if c >= 2 and c ** rank == hosts:
                return (c,) * (rank - 1)
    raise ValueError(f"{hosts} hosts: a k-ary flattened butterfly has k^2 or k^3 hosts (e.g. 16, 27, 64, 512); "
                     f"give such a host count, or --dims (hosts = prod(dims) * dims[0])")


def build_topology(spec: TopologySpec) -> Topology:
    """Build the topology `spec` describes; bad values raise ValueError saying what to change."""
    common = dict(link=spec.link_object(), gpus_per_server=spec.gpus_per_server)
    if spec.kind == "star":
        return star(hosts=spec.hosts, **common)
    if spec.kind == "fat-tree":
        return fat_tree(levels=spec.levels, hosts=spec.hosts, hosts_per_leaf=spec.hosts_per_leaf,
                        bisection=spec.bisection, leaves_per_pod=spec.leaves_per_pod,
                        routing=spec.routing, seed=spec.seed, **common)
    if spec.kind == "leaf-spine":
        return leaf_spine(hosts=spec.hosts, hosts_per_leaf=spec.hosts_per_leaf, spines=spec.spines,
                          routing=spec.routing, seed=spec.seed, **common)
    from fabriclab.fabric.direct_networks import flattened_butterfly, ring, torus

    if spec.kind == "ring":
        return ring(spec.hosts, **common)
    if spec.kind == "torus":
        return torus(spec.shape, **common)
    return flattened_butterfly(dims=spec.shape, **common)

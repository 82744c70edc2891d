"""One description of a network, as the CLI and the sweeps write it, turned into a `Topology`.

Try it: `fabriclab simulate collective --topology fat-tree --hosts 512 --bisection 1/4 --link 4GB/s`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from fabriclab.fabric.fattree import fat_tree, leaf_spine, star
from fabriclab.fabric.links import DEFAULT_LINK
from fabriclab.fabric.others import flattened_butterfly, ring, torus
from fabriclab.fabric.topology import Topology

KINDS = ("star", "fat-tree", "leaf-spine", "ring", "torus", "flattened-butterfly")


@dataclass(frozen=True, kw_only=True)
class TopologySpec:
    """Everything that picks a topology; fields a kind does not use are ignored by it."""

    kind: str = "fat-tree"
    """One of star, fat-tree, leaf-spine, ring, torus, flattened-butterfly."""
    hosts: int = 16
    """Number of hosts (for torus and flattened butterfly: taken from `dims`)."""
    levels: int = 2
    """Fat-tree levels, 2 or 3."""
    hosts_per_leaf: int = 16
    """Hosts under one leaf switch (fat tree, leaf-spine)."""
    bisection: str = "1"
    """Fat-tree bisection ratio, e.g. 1, 1/2, 1/4."""
    leaves_per_pod: int | None = None
    """3-level fat trees: leaves per pod (default hosts_per_leaf)."""
    spines: int = 4
    """Leaf-spine: number of spines."""
    dims: tuple[int, ...] = (4, 4)
    """Torus and flattened butterfly dimensions."""
    link: str = DEFAULT_LINK
    """Link preset name (e.g. 25GbE, EDR) or plain `bandwidth@latency`."""
    bandwidth: str | None = None
    """Overrides the link's bandwidth, e.g. 4GB/s or 25Gbps."""
    latency: str | None = None
    """Overrides the per-link latency, e.g. 0.2us."""
    gpus_per_host: int = 1
    """Ranks per host; they share the host's intra-node links and NIC."""
    routing: str = "dmodk"
    """Fat-tree routing: dmodk (deterministic D-mod-K) or ecmp (seeded hash)."""
    seed: int = 0
    """Seed of ECMP hashing."""

    def as_dict(self) -> dict:
        return asdict(self)


def build_topology(spec: TopologySpec) -> Topology:
    """Build the topology `spec` describes; bad values raise ValueError saying what to change."""
    common = dict(link=spec.link, link_Bps=spec.bandwidth, latency_s=spec.latency,
                  gpus_per_host=spec.gpus_per_host)
    if spec.kind == "star":
        return star(hosts=spec.hosts, **common)
    if spec.kind == "fat-tree":
        return fat_tree(levels=spec.levels, hosts=spec.hosts, hosts_per_leaf=spec.hosts_per_leaf,
                        bisection=spec.bisection, leaves_per_pod=spec.leaves_per_pod,
                        routing=spec.routing, seed=spec.seed, **common)
    if spec.kind == "leaf-spine":
        return leaf_spine(hosts=spec.hosts, hosts_per_leaf=spec.hosts_per_leaf, spines=spec.spines,
                          routing=spec.routing, seed=spec.seed, **common)
    if spec.kind == "ring":
        return ring(spec.hosts, **common)
    if spec.kind == "torus":
        return torus(spec.dims, **common)
    if spec.kind == "flattened-butterfly":
        return flattened_butterfly(dims=spec.dims, **common)
    raise ValueError(f"unknown topology {spec.kind!r}: use one of {', '.join(KINDS)}")

"""GPU servers with an internal fabric and several NICs, on a rail-optimised or a plain fat tree.

Each of the `num_servers` servers has G GPUs (the endpoints; endpoint e is GPU e % G of server e // G)
and K NICs. Inside a server:

* `nvswitch`: every GPU has one link to the server's NVSwitch (its NVLink bandwidth per direction);
  GPUs of one server talk GPU -> NVSwitch -> GPU. (A direct NVLink mesh of two GPUs behaves the same.)
* `pcie`: GPUs talk through PCIe switches: GPU -> switch -> GPU when they share one, else through the
  host's root complex (`cpu`), as in Samsi et al.'s TX-GAIA nodes (2 V100s and one NIC per node).

NIC k of a server sits on a PCIe switch with GPUs k*G/K .. (k+1)*G/K - 1 (each GPU links to it at PCIe
bandwidth), so with K < G several GPUs share a NIC. The network is two levels of switches:

* `rail` (rail-optimised, as in NVIDIA's DGX SuperPOD): NIC k of every server is on a leaf of rail k;
  a rail has ceil(servers / leaf_ports) leaves.
* `fat-tree` (plain): the NICs, numbered server-major (server s, NIC k -> s*K + k), fill the leaves in
  order, so all NICs of a server share a leaf.

Leaves link once to each of `spines` spines (`max(1, round(leaf_ports * bisection))`; none when there is
one leaf), all at the NIC's rate. Routes: a message to another server leaves through the NIC on the
*destination GPU's* rail, reaching it over NVLink first when that NIC is another GPU's (NCCL's PXN, since
2.12), so rail traffic never crosses a spine; without NVLink it leaves through the sender's own NIC and
crosses the root complex on arrival if needed. Up to the spines D-mod-K on the destination NIC.

Try it: `python -c "from fabriclab.fabric.rail import gpu_cluster_topology as g; t = g(num_servers=4);
print(t, [t.link_name(l) for l in t.route(0, 9)])"`.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from fabriclab.fabric.links import Link, parse_link
from fabriclab.fabric.topology import Topology

FABRICS = ("rail", "fat-tree")
INTRA = ("nvswitch", "pcie")


class GpuClusterRouter:
    """Routes of `gpu_cluster_topology` (module doc), one pair at a time with a cache."""

    def __init__(self, *, G: int, K: int, S: int, nvswitch: bool, ids: dict, leaf_of, spines: int) -> None:
        self.G, self.K, self.S, self.nvswitch = G, K, S, nvswitch
        self.ids = ids            # (src node, dst node) -> directed link id
        self.leaf_of = leaf_of    # (server, nic) -> leaf node
        self.spines = spines      # spine node ids
        self.num_endpoints = S * G
        self._cache: dict[tuple[int, int], list[int]] = {}

    def nic_of(self, gpu: int) -> int:
        return gpu * self.K // self.G

    def _node(self, kind: str, server: int, index: int = 0) -> int:
        return self.ids[("node", kind, server, index)]

    def _path(self, nodes: list[int]) -> list[int]:
        return [self.ids[(a, b)] for a, b in itertools.pairwise(nodes)]

    def route(self, a: int, b: int) -> list[int]:
        found = self._cache.get((a, b))
        if found is not None:
            return found
        sa, ga = divmod(a, self.G)
        sb, gb = divmod(b, self.G)
        ka, kb = self.nic_of(ga), self.nic_of(gb)
        nic = lambda s, k: self._node("nic", s, k)
        if a == b:
            nodes = [a]
        elif sa == sb:
            if self.nvswitch:
                nodes = [a, self._node("nvsw", sa), b]
            elif ka == kb:
                nodes = [a, nic(sa, ka), b]
            else:
                nodes = [a, nic(sa, ka), self._node("cpu", sa), nic(sa, kb), b]
        else:
            k = kb if self.nvswitch else ka
            if ka == k:
                nodes = [a, nic(sa, k)]
            else:  # PXN: over NVLink to the GPU next to the destination's rail NIC, then out
                relay = sa * self.G + k * self.G // self.K
                nodes = [a, self._node("nvsw", sa), relay, nic(sa, k)]
            leaf_a, leaf_b = self.leaf_of(sa, k), self.leaf_of(sb, k)
            nodes.append(leaf_a)
            if leaf_a != leaf_b:
                nodes += [self.spines[(sb * self.K + k) % len(self.spines)], leaf_b]
            nodes.append(nic(sb, k))
            if kb != k:
                nodes += [self._node("cpu", sb), nic(sb, kb)]
            nodes.append(b)
        path = self._path(nodes)
        self._cache[(a, b)] = path
        return path

    def routes(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        paths = [self.route(int(s), int(d)) for s, d in zip(src, dst)]
        offsets = np.zeros(len(paths) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in paths], out=offsets[1:])
        links = np.fromiter((link for p in paths for link in p), dtype=np.int64, count=int(offsets[-1]))
        return offsets, links


def gpu_cluster_topology(*, num_servers: int, gpus_per_server: int = 8, intra: str = "nvswitch",
                         intra_link: Link | str = "NVLink-A100", pcie: Link | str = "PCIe4x16",
                         nics_per_server: int = 8, nic: Link | str = "HDR", fabric: str = "rail",
                         leaf_ports: int = 20, bisection: float = 1.0) -> Topology:
    """A Topology of GPU servers (module doc). `leaf_ports`: NIC ports per leaf; `bisection`: leaf up-links
    per down-port (1 = non-blocking)."""
    S, G, K = num_servers, gpus_per_server, nics_per_server
    for key, value in (("num_servers", S), ("gpus_per_server", G), ("nics_per_server", K),
                       ("leaf_ports", leaf_ports)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{key}={value!r}: give a whole number >= 1")
    if G % K:
        raise ValueError(f"{G} GPUs per server cannot share {K} NICs evenly: use a NIC count that divides "
                         f"the GPU count (e.g. 1, 2 or {G})")
    if intra not in INTRA:
        raise ValueError(f"intra={intra!r}: use one of {', '.join(INTRA)}")
    if fabric not in FABRICS:
        raise ValueError(f"fabric={fabric!r}: use one of {', '.join(FABRICS)}")
    if not 0 < bisection <= 1:
        raise ValueError(f"bisection={bisection!r}: give a ratio in (0, 1]")
    intra_link, pcie, nic = parse_link(intra_link), parse_link(pcie), parse_link(nic)
    nvswitch = intra == "nvswitch"
    names = [f"s{s}.gpu{g}" for s in range(S) for g in range(G)]
    ids: dict = {}

    def add_node(name: str, key: tuple) -> int:
        ids[("node", *key)] = len(names)
        names.append(name)
        return len(names) - 1

    for s in range(S):
        if nvswitch:
            add_node(f"s{s}.nvsw", ("nvsw", s, 0))
        elif K > 1:
            add_node(f"s{s}.cpu", ("cpu", s, 0))
        for k in range(K):
            add_node(f"s{s}.nic{k}", ("nic", s, k))
    if fabric == "rail":
        per_rail = math.ceil(S / leaf_ports)
        num_leaves = K * per_rail
        leaf_index = lambda s, k: k * per_rail + s // leaf_ports
    else:
        num_leaves = math.ceil(S * K / leaf_ports)
        leaf_index = lambda s, k: (s * K + k) // leaf_ports
    leaves = [add_node(f"leaf{i}", ("leaf", i, 0)) for i in range(num_leaves)]
    num_spines = 0 if num_leaves == 1 else max(1, round(leaf_ports * bisection))
    spines = [add_node(f"spine{j}", ("spine", j, 0)) for j in range(num_spines)]

    src: list[int] = []
    dst: list[int] = []
    bw: list[float] = []
    lat: list[float] = []

    def duplex(a: int, b: int, link: Link) -> None:
        for x, y in ((a, b), (b, a)):
            ids[(x, y)] = len(src)
            src.append(x)
            dst.append(y)
            bw.append(link.bandwidth_Bps)
            lat.append(link.latency_s)

    for s in range(S):
        for g in range(G):
            gpu = s * G + g
            nic_node = ids[("node", "nic", s, g * K // G)]
            duplex(gpu, nic_node, pcie)
            if nvswitch:
                duplex(gpu, ids[("node", "nvsw", s, 0)], intra_link)
        for k in range(K):
            nic_node = ids[("node", "nic", s, k)]
            if not nvswitch and K > 1:
                duplex(nic_node, ids[("node", "cpu", s, 0)], pcie)
            duplex(nic_node, leaves[leaf_index(s, k)], nic)
    for leaf in leaves:
        for spine in spines:
            duplex(leaf, spine, nic)
    router = GpuClusterRouter(G=G, K=K, S=S, nvswitch=nvswitch, ids=ids,
                              leaf_of=lambda s, k: leaves[leaf_index(s, k)], spines=spines)
    label = (f"{fabric}(servers={S},gpus_per_server={G},intra={intra},nics_per_server={K},nic={nic.name},"
             f"leaf_ports={leaf_ports},bisection={bisection:g})")
    return Topology(name=label, num_hosts=S, gpus_per_server=G, node_names=tuple(names),
                    link_src=np.array(src), link_dst=np.array(dst), bandwidth_Bps=np.array(bw),
                    latency_s=np.array(lat), router=router)

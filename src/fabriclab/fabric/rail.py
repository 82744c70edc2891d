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
crosses the root complex on arrival if needed. Up to the spines D-mod-K (Zahavi): the spine is the
destination's index on its leaf level mod the spines, the server for a rail (a rail is a fat tree of the
servers), the NIC s*K + k for a plain tree; so a leaf whose down-ports match its up-links is
non-blocking for any traffic.

Nodes and links are numbered arithmetically (GPUs, then each server's NVSwitch or root complex and NICs,
then leaves, then spines; per server each GPU's links, then each NIC's), so routes are numpy arithmetic
on arrays of pairs: 100,000 GPUs build in about a second.

Try it: `python -c "from fabriclab.fabric.rail import gpu_cluster_topology as g; t = g(num_servers=4);
print(t, [t.link_name(l) for l in t.route(0, 9)])"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabriclab.fabric.links import Link, parse_link
from fabriclab.fabric.topology import Topology

FABRICS = ("rail", "fat-tree")
INTRA = ("nvswitch", "pcie")
# Longest route: GPU -> NVSwitch -> relay GPU -> NIC -> leaf -> spine -> leaf -> NIC -> GPU (8 links);
# over PCIe: GPU -> NIC -> leaf -> spine -> leaf -> NIC -> root complex -> NIC -> GPU (8 links).
_MAX_HOPS = 8


@dataclass(frozen=True, kw_only=True)
class GpuClusterRouter:
    """Routes of `gpu_cluster_topology` (module doc), vectorized over pairs, and the shape they follow."""

    G: int
    """GPUs per server."""
    K: int
    """NICs per server."""
    S: int
    """Servers."""
    nvswitch: bool
    """GPUs of a server meet on an NVSwitch (else PCIe switches and a root complex)."""
    nic_leaf: np.ndarray
    """(S, K) leaf index (0-based among the leaves) of every NIC."""
    nic_spine: np.ndarray
    """(S, K) spine index a message *to* this NIC crosses when it changes leaves (-1: no spines)."""
    num_leaves: int
    num_spines: int
    pxn: bool = True
    """NVSwitch servers send to another server through the NIC on the destination GPU's rail (NCCL's PXN,
    since 2.12); False (NCCL_PXN_DISABLE=1): through the sender's own NIC, to the receiver's."""

    @property
    def num_endpoints(self) -> int:
        return self.S * self.G

    @property
    def hub(self) -> int:
        """1 when a server has an NVSwitch or a root complex node, else 0."""
        return int(self.nvswitch or self.K > 1)

    @property
    def per_gpu(self) -> int:
        """Directed links per GPU: to and from its NIC's PCIe switch, to and from the NVSwitch."""
        return 2 + 2 * self.nvswitch

    @property
    def per_nic(self) -> int:
        """Directed links per NIC: to and from the root complex (PCIe, K > 1), to and from its leaf."""
        return 2 * (not self.nvswitch and self.K > 1) + 2

    @property
    def per_server(self) -> int:
        return self.G * self.per_gpu + self.K * self.per_nic

    def gpu_link(self, server, gpu, which: int):
        """0: GPU -> NIC, 1: NIC -> GPU, 2: GPU -> NVSwitch, 3: NVSwitch -> GPU."""
        return server * self.per_server + gpu * self.per_gpu + which

    def nic_link(self, server, nic, which: int):
        """0: NIC -> root complex, 1: root complex -> NIC (PCIe servers), then NIC -> leaf, leaf -> NIC."""
        return server * self.per_server + self.G * self.per_gpu + nic * self.per_nic + which

    def spine_link(self, leaf, spine, down: bool):
        return self.S * self.per_server + (leaf * self.num_spines + spine) * 2 + int(down)

    @property
    def spine_tier(self) -> slice:
        """The ids of every leaf-spine link: leaf by leaf, spine by spine, up then down."""
        first = self.spine_link(0, 0, False)
        return slice(first, first + 2 * self.num_leaves * self.num_spines)

    def end_nics(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The NIC (index in its server) a message from `src` to `dst` on another server leaves through,
        and the one it arrives at (module doc: PXN, or the sender's own NIC)."""
        ka = np.asarray(src) % self.G * self.K // self.G
        kb = np.asarray(dst) % self.G * self.K // self.G
        if not self.nvswitch:
            return ka, ka
        return (kb, kb) if self.pxn else (ka, kb)

    def routes(self, src: np.ndarray, dst: np.ndarray, spine: np.ndarray | None = None
               ) -> tuple[np.ndarray, np.ndarray]:
        """CSR (offsets, link ids) of the routes of pairs (src[i], dst[i]), each in order from the source.
        `spine`: the spine each pair crosses where it changes leaves (a hashed path, `nccl/routing.py`);
        None: D-mod-K."""
        src, dst = np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)
        n, G, K = src.size, self.G, self.K
        sa, ga = np.divmod(src, G)
        sb, gb = np.divmod(dst, G)
        ka, kb = ga * K // G, gb * K // G
        hops = np.full((n, _MAX_HOPS), -1, dtype=np.int64)
        pos = np.zeros(n, dtype=np.int64)

        def put(rows: np.ndarray, links) -> None:
            hops[rows, pos[rows]] = links if np.ndim(links) == 0 else links[rows]
            pos[rows] += 1

        every = np.arange(n)
        intra, inter = every[(sa == sb) & (src != dst)], every[sa != sb]
        cpu = 2 * (not self.nvswitch and K > 1)
        if self.nvswitch:
            put(intra, self.gpu_link(sa, ga, 2))
            put(intra, self.gpu_link(sb, gb, 3))
        else:  # through the shared PCIe switch, or NIC -> root complex -> NIC
            via = intra[ka[intra] != kb[intra]]
            put(intra, self.gpu_link(sa, ga, 0))
            put(via, self.nic_link(sa, ka, 0))
            put(via, self.nic_link(sb, kb, 1))
            put(intra, self.gpu_link(sb, gb, 1))
        k, k_in = self.end_nics(src, dst)
        relay = inter[ka[inter] != k[inter]]  # PXN: over NVLink to the GPU next to the destination's rail NIC
        relay_gpu = k * G // K
        put(inter[ka[inter] == k[inter]], self.gpu_link(sa, ga, 0))
        put(relay, self.gpu_link(sa, ga, 2))
        put(relay, self.gpu_link(sa, relay_gpu, 3))
        put(relay, self.gpu_link(sa, relay_gpu, 0))
        put(inter, self.nic_link(sa, k, cpu))
        leaf_a, leaf_b = self.nic_leaf[sa, k], self.nic_leaf[sb, k_in]
        cross = inter[leaf_a[inter] != leaf_b[inter]]
        spine = self.nic_spine[sb, k_in] if spine is None else np.asarray(spine, dtype=np.int64)
        put(cross, self.spine_link(leaf_a, spine, False))
        put(cross, self.spine_link(leaf_b, spine, True))
        put(inter, self.nic_link(sb, k_in, cpu + 1))
        land = inter[kb[inter] != k_in[inter]]  # PCIe: through the root complex to the destination's NIC
        put(land, self.nic_link(sb, k, 0))
        put(land, self.nic_link(sb, kb, 1))
        put(inter, self.gpu_link(sb, gb, 1))
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(pos, out=offsets[1:])
        return offsets, hops[hops >= 0]


def _check(S: int, G: int, K: int, leaf_ports: int, intra: str, fabric: str, bisection: float) -> None:
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


def _node_names(S: int, G: int, K: int, hub: str | None, num_leaves: int, num_spines: int) -> list[str]:
    names = [f"s{s}.gpu{g}" for s in range(S) for g in range(G)]
    local = ([hub] if hub else []) + [f"nic{k}" for k in range(K)]
    names += [f"s{s}.{x}" for s in range(S) for x in local]
    return names + [f"leaf{i}" for i in range(num_leaves)] + [f"spine{j}" for j in range(num_spines)]


def _columns(pairs: list, shape: tuple[int, int]) -> list[np.ndarray]:
    """(src, dst, bandwidth, latency) of duplex halves `pairs` = [(src nodes, dst nodes, Link)], each of
    `shape` (servers, GPUs or NICs): one row per server, the pairs of one GPU or NIC side by side."""
    out = []
    for i in range(4):
        parts = [np.broadcast_to(p[i], shape) if i < 2 else
                 np.full(shape, p[2].bandwidth_Bps if i == 2 else p[2].latency_s) for p in pairs]
        out.append(np.stack(parts, axis=2).reshape(shape[0], -1))
    return out


def gpu_cluster_topology(*, num_servers: int, gpus_per_server: int = 8, intra: str = "nvswitch",
                         intra_link: Link | str = "NVLink-A100", pcie: Link | str = "PCIe4x16",
                         nics_per_server: int = 8, nic: Link | str = "HDR", fabric: str = "rail",
                         leaf_ports: int = 20, bisection: float = 1.0, pxn: bool = True) -> Topology:
    """A Topology of GPU servers (module doc). `leaf_ports`: NIC ports per leaf; `bisection`: leaf up-links
    per down-port (1 = non-blocking); `pxn`: NCCL's PXN on NVSwitch servers (`GpuClusterRouter.pxn`)."""
    S, G, K = num_servers, gpus_per_server, nics_per_server
    _check(S, G, K, leaf_ports, intra, fabric, bisection)
    intra_link, pcie, nic = parse_link(intra_link), parse_link(pcie), parse_link(nic)
    nvswitch = intra == "nvswitch"
    server, rail = np.arange(S)[:, None], np.arange(K)[None, :]
    if fabric == "rail":
        per_rail = math.ceil(S / leaf_ports)
        num_leaves, nic_leaf = K * per_rail, rail * per_rail + server // leaf_ports
        port = np.broadcast_to(server, (S, K))  # D-mod-K index: the server, on its rail
    else:
        num_leaves, nic_leaf = math.ceil(S * K / leaf_ports), (server * K + rail) // leaf_ports
        port = server * K + rail
    num_spines = 0 if num_leaves == 1 else max(1, round(leaf_ports * bisection))
    router = GpuClusterRouter(G=G, K=K, S=S, nvswitch=nvswitch, nic_leaf=nic_leaf.astype(np.int64),
                              nic_spine=port % num_spines if num_spines else np.full((S, K), -1),
                              num_leaves=num_leaves, num_spines=num_spines, pxn=pxn)
    hub = "nvsw" if nvswitch else ("cpu" if K > 1 else None)
    gpu = np.arange(S * G).reshape(S, G)
    hub_node = S * G + server * (router.hub + K)
    nic_node = hub_node + router.hub + rail
    leaf_node = S * G + S * (router.hub + K) + np.arange(num_leaves)
    spine_node = S * G + S * (router.hub + K) + num_leaves + np.arange(num_spines)
    gpu_nic, leaf_of_nic = nic_node[:, np.arange(G) * K // G], leaf_node[nic_leaf]
    # Link order (what `GpuClusterRouter` counts in): per server each GPU's links (to its NIC, from it[, to
    # the NVSwitch, from it]), then each NIC's ([to the root complex, from it,] to its leaf, from it); then
    # per leaf, per spine: up, down.
    gpu_pairs = [(gpu, gpu_nic, pcie), (gpu_nic, gpu, pcie)]
    if nvswitch:
        gpu_pairs += [(gpu, hub_node, intra_link), (hub_node, gpu, intra_link)]
    nic_pairs = [(nic_node, hub_node, pcie), (hub_node, nic_node, pcie)] if router.per_nic == 4 else []
    nic_pairs += [(nic_node, leaf_of_nic, nic), (leaf_of_nic, nic_node, nic)]
    g_cols, n_cols = _columns(gpu_pairs, (S, G)), _columns(nic_pairs, (S, K))
    up = np.stack([np.repeat(leaf_node, num_spines), np.tile(spine_node, num_leaves)], axis=1)
    spine_cols = (up.ravel(), up[:, ::-1].ravel(), np.full(up.size, nic.bandwidth_Bps),
                  np.full(up.size, nic.latency_s))
    cols = [np.concatenate((np.concatenate((g, k), axis=1).ravel(), x))
            for g, k, x in zip(g_cols, n_cols, spine_cols)]
    label = (f"{fabric}(servers={S},gpus_per_server={G},intra={intra},nics_per_server={K},nic={nic.name},"
             f"leaf_ports={leaf_ports},bisection={bisection:g})")
    return Topology(name=label, num_hosts=S, gpus_per_server=G,
                    node_names=tuple(_node_names(S, G, K, hub, num_leaves, num_spines)),
                    link_src=cols[0], link_dst=cols[1], bandwidth_Bps=cols[2], latency_s=cols[3], router=router)

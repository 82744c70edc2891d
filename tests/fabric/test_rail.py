"""The vectorized GPU-cluster topology against a naive one: every node, link and route of many shapes."""

import math

import numpy as np
import pytest

from fabriclab.fabric.rail import gpu_cluster_topology

SHAPES = [dict(num_servers=s, gpus_per_server=g, nics_per_server=k, intra=i, fabric=f, leaf_ports=p, bisection=b)
          for s in (1, 3, 7) for g, k in ((8, 8), (8, 2), (2, 1), (4, 4)) for i in ("nvswitch", "pcie")
          for f in ("rail", "fat-tree") for p, b in ((3, 1.0), (4, 0.5), (6, 1 / 3))]


def _naive(S, G, K, intra, fabric, leaf_ports, bisection):
    """(node names, set of (src name, dst name) links, route(a, b) as node names), written out by hand."""
    nv = intra == "nvswitch"
    hub = "nvsw" if nv else ("cpu" if K > 1 else None)
    names = [f"s{s}.gpu{g}" for s in range(S) for g in range(G)]
    names += [f"s{s}.{x}" for s in range(S) for x in ([hub] if hub else []) + [f"nic{k}" for k in range(K)]]
    if fabric == "rail":
        per_rail = math.ceil(S / leaf_ports)
        leaves, leaf = K * per_rail, lambda s, k: k * per_rail + s // leaf_ports
        port = lambda s, k: s
    else:
        leaves, leaf = math.ceil(S * K / leaf_ports), lambda s, k: (s * K + k) // leaf_ports
        port = lambda s, k: s * K + k
    spines = 0 if leaves == 1 else max(1, round(leaf_ports * bisection))
    names += [f"leaf{i}" for i in range(leaves)] + [f"spine{j}" for j in range(spines)]
    edges = set()
    for s in range(S):
        for g in range(G):
            edges.add((f"s{s}.gpu{g}", f"s{s}.nic{g * K // G}"))
            if nv:
                edges.add((f"s{s}.gpu{g}", f"s{s}.nvsw"))
        for k in range(K):
            edges.add((f"s{s}.nic{k}", f"leaf{leaf(s, k)}"))
            if not nv and K > 1:
                edges.add((f"s{s}.nic{k}", f"s{s}.cpu"))
    edges |= {(f"leaf{i}", f"spine{j}") for i in range(leaves) for j in range(spines)}
    links = edges | {(b, a) for a, b in edges}

    def route(a, b):
        (sa, ga), (sb, gb) = divmod(a, G), divmod(b, G)
        ka, kb = ga * K // G, gb * K // G
        gpu, nic = lambda s, g: f"s{s}.gpu{g}", lambda s, k: f"s{s}.nic{k}"
        if a == b:
            return [gpu(sa, ga)]
        if sa == sb:
            if nv:
                return [gpu(sa, ga), f"s{sa}.nvsw", gpu(sb, gb)]
            mid = [nic(sa, ka)] if ka == kb else [nic(sa, ka), f"s{sa}.cpu", nic(sa, kb)]
            return [gpu(sa, ga), *mid, gpu(sb, gb)]
        k = kb if nv else ka
        path = [gpu(sa, ga)] + ([] if ka == k else [f"s{sa}.nvsw", gpu(sa, k * G // K)]) + [nic(sa, k)]
        path.append(f"leaf{leaf(sa, k)}")
        if leaf(sa, k) != leaf(sb, k):
            path += [f"spine{port(sb, k) % spines}", f"leaf{leaf(sb, k)}"]
        path.append(nic(sb, k))
        if kb != k:
            path += [f"s{sb}.cpu", nic(sb, kb)]
        return path + [gpu(sb, gb)]

    return names, links, route


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(str(v) for v in s.values()))
def test_nodes_links_and_every_route_match_the_naive_topology(shape):
    topo = gpu_cluster_topology(**shape)
    names, links, route = _naive(*shape.values())
    assert list(topo.node_names) == names
    built = [(topo.node_names[a], topo.node_names[b]) for a, b in zip(topo.link_src, topo.link_dst)]
    assert len(built) == len(set(built)) and set(built) == links
    n = topo.num_endpoints
    src, dst = np.repeat(np.arange(n), n), np.tile(np.arange(n), n)
    offsets, ids = topo.routes(src, dst)
    for i, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
        hops = ids[offsets[i]:offsets[i + 1]]
        got = [topo.node_names[topo.link_src[h]] for h in hops] + [topo.node_names[topo.link_dst[hops[-1]]]] \
            if hops.size else [topo.node_names[a]]
        assert got == route(a, b), (a, b)


def test_link_rates_follow_their_kind():
    topo = gpu_cluster_topology(num_servers=3, leaf_ports=2, intra_link="NVLink-A100", pcie="PCIe4x16", nic="HDR")
    kind = {("gpu", "nvsw"): 300e9, ("gpu", "nic"): 31.5e9, ("nic", "leaf"): 25e9, ("leaf", "spine"): 25e9}
    for a, b, bw in zip(topo.link_src, topo.link_dst, topo.bandwidth_Bps):
        ends = tuple(sorted(topo.node_names[x].split(".")[-1].rstrip("0123456789") for x in (a, b)))
        key = next(k for k in kind if tuple(sorted(k)) == ends)
        assert bw == pytest.approx(kind[key], rel=0.01), (topo.link_name(0), ends)


def test_a_rail_spreads_a_leaf_over_every_spine():
    # 4 servers per leaf, 4 spines: D-mod-K on the server sends each of a leaf's servers to its own spine
    topo = gpu_cluster_topology(num_servers=8, leaf_ports=4, fabric="rail")
    spines = {topo.node_names[topo.link_dst[h]] for b in range(4, 8) for h in topo.route(0, b * 8)
              if topo.node_names[topo.link_dst[h]].startswith("spine")}
    assert spines == {"spine0", "spine1", "spine2", "spine3"}


def test_100000_gpus_build_in_seconds():
    topo = gpu_cluster_topology(num_servers=12500, leaf_ports=32, nic="NDR")
    assert topo.num_endpoints == 100000 and topo.num_links == 800192
    offsets, links = topo.routes(np.arange(100000), (np.arange(100000) + 8) % 100000)
    assert np.all(np.diff(offsets) >= 4)  # GPU -> NIC -> leaf [-> spine -> leaf] -> NIC -> GPU

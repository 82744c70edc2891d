"""Which algorithm and protocol NCCL picks at each size: its own tuning model, per NCCL release.

NCCL does not measure; it estimates the time of every (algorithm, protocol) with fixed constants and
the bandwidth its topology search found, and runs the cheapest (`ncclTopoTuneModel` and
`ncclTopoGetAlgoTime` in `src/graph/tuning.cc`, the pick in `src/enqueue.cc`). This module re-implements
that estimate with the constants of the cluster's `library.nccl_version` (`nccl/versions.py`, 2.9 to 2.30)
so a prediction runs what NCCL would run, at any scale; what the choice then *costs* on the cluster is
`nccl/predict.py`'s fitted model (where nothing was fitted, LL at the busBw this model gives it:
`nccl_busbw_GBps`, `nccl/library.py`). Per algorithm and protocol:

* latency = baseLat + hwLat per step (NVLink or PCI inside a server, NET across) x steps, plus the
  version's refinements (LL x 1.8 inside servers up to 2.17, the network overhead floor from 2.18, ...);
* busBw = the graph's bandwidth (inside a server up to 2 servers, the network's beyond) x the protocol's
  and algorithm's factors, at most the per-channel ceilings of the GPU generation;
* algBw = busBw x nRanks / steps (ring, NVLS from 2.28) or x 0.5 (trees, CollNet);
  time = latency (x the ring Simple "plateau" factor) + bytes / algBw (trees x a correction per size).

What NCCL learns from its topology search is taken from the cluster: ring/tree/PAT graphs carry the
per-GPU NVLink (NVSwitch) or PCIe bandwidth up to 2 servers and min(that, the NICs) beyond, over
`library.num_channels`; an NVLS graph has one channel (head) per GPU on one server, per NIC across
servers, each with its share of NVLink and of the NICs; a CollNet graph one channel per NIC. Hosts
are taken as x86 with Intel CPUs (NCCL's LL ceilings and network overhead depend on the vendor).

Algorithms are returned as ("ring", "LL") style labels: ring, tree, collnet_direct (2.9-2.13's single
CollNet too), collnet_chain, nvls, nvls_tree, pat. NVLS needs an NVSwitch server of compute capability
9.0+ (H100, H200, B200: NVLink SHARP); CollNet needs SHARP in the network (the cluster file's
`network.sharp`, or `collnet=True`); PAT runs allgather / reduce_scatter at one GPU per server from 2.23.
alltoall and sendrecv are point-to-point in NCCL, outside the tuning model: no estimates, and the label
("p2p", "Simple"). Trees are considered on one server too (NCCL builds them as chains there).

Version 2.9.9 is what cluster files written before versions were recorded say (`cluster.LEGACY_NCCL_VERSION`);
it keeps fabriclab's earlier model unchanged (`versions.table_of`: NCCL 2.7.8's constants, `_legacy_estimates`
below), so no calibration moves. Every other version runs its own table, 2.9.6 / 2.9.8 v2.9.9-1's.

Try it: `python -c "from fabriclab.fabric.cluster import a100_hdr_prior as c;
from fabriclab.nccl.choice import nccl_choices as n; print(n(c(), 128, [1 << 20, 1 << 30]))"`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.nccl_env import permitted
from fabriclab.fabric.nccl_tuner import per_rank_bytes, tuner_rule
from fabriclab.nccl.versions import LEGACY_TABLE, PROTOCOLS, TuningTable, compute_capability, table_of

COLLECTIVES = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")
POINT_TO_POINT = ("alltoall", "sendrecv")
_AG_RS = ("allgather", "reduce_scatter")


@dataclass(frozen=True)
class _Machine:
    """What the tuning model sees of a communicator on the cluster (bandwidths in GB/s)."""

    n: int
    nodes: int
    per_server: int
    cc: int | None
    arch: str
    nvlink: bool
    channels: int
    speed: float          # ring/tree graph: nChannels x (bwIntra up to 2 servers, bwInter beyond)
    intra: float          # per-GPU NVLink or PCIe
    nics: int
    nic_total: float      # NICs x rate per server
    busbw_cap: float | None
    collnet: bool

    @property
    def ppn(self) -> float:
        return self.n / self.nodes

    @property
    def index2(self) -> int:
        return min(self.nodes - 1, 2)

    def nvls_graph(self) -> tuple[int, float, float]:
        """nChannels, bwIntra, bwInter of the NVLS graph: a head per GPU (one server) or per NIC."""
        heads = self.per_server if self.nodes == 1 else min(self.per_server, self.nics)
        inter = self.intra if self.nodes == 1 else self.nic_total
        return heads, self.intra / heads, inter / heads


def _machine(cluster: ClusterModel, table: TuningTable, n: int, nodes: int, collnet: bool) -> _Machine:
    server, lib = cluster.server, cluster.library
    nvlink = server.intra == "nvswitch"
    intra = (server.intra_bandwidth_Bps if nvlink else server.pcie_bandwidth_Bps) / 1e9
    nic_total = server.nics_per_server * server.nic_bandwidth_Bps / 1e9
    cc = compute_capability(server.gpu_name)
    if cc is None and lib.selection_busbw_cap_Bps is not None:  # files that only recorded NCCL's sm80 cap
        cc = 80
    arch = table.arch(cc)
    cap = table.busbw_cap.get(arch)
    return _Machine(n=n, nodes=nodes, per_server=n // nodes, cc=cc, arch=arch, nvlink=nvlink,
                    channels=lib.num_channels, speed=intra if nodes <= 2 else min(intra, nic_total), intra=intra,
                    nics=server.nics_per_server, nic_total=nic_total, busbw_cap=cap, collnet=collnet)


def _enabled(t: TuningTable, m: _Machine, algo: str, coll: str, lib_algorithms) -> bool:
    if algo not in t.algorithms or (algo in ("ring", "tree") and algo not in lib_algorithms):
        return False
    if coll in ("broadcast", "reduce"):
        return algo == "ring"
    if algo == "tree":
        return coll == "allreduce"
    if algo == "nvls_tree":
        return coll == "allreduce" and m.nodes > 1 and _nvls_ok(t, m)
    if algo == "collnet_chain":
        return coll == "allreduce" and _collnet_ok(m)
    if algo == "collnet_direct":
        split = "collnet_chain" in t.algorithms  # 2.14+: direct needs NVSwitch
        return _collnet_ok(m) and (m.nvlink or not split) and (
            coll == "allreduce" or (coll in _AG_RS and t.collnet_ag_rs is not None and m.per_server <= m.nics))
    if algo == "nvls":
        if coll not in t.nvls_collectives or not _nvls_ok(t, m):
            return False
        if m.nodes == 1:
            return True
        # across servers NVLS runs with CollNet (SHARP); allgather/reduce_scatter with a NIC (head) per GPU
        return t.nvls_multinode and m.collnet and (
            coll == "allreduce" or (t.nvls_ag_rs_multinode and m.per_server <= m.nics))
    if algo == "pat":
        return coll in _AG_RS and m.per_server == 1 and m.n > 1
    return True  # ring


def _nvls_ok(t: TuningTable, m: _Machine) -> bool:
    return (t.nvls_bandwidth is not None and m.nvlink and m.cc is not None and m.cc >= 90
            and m.per_server >= t.nvls_min_gpus and (t.nvls_bandwidth != "efficiency" or m.nvls_graph()[0] >= 2))


def _collnet_ok(m: _Machine) -> bool:
    return m.collnet and m.nodes >= 2  # NCCL_COLLNET_NODE_THRESHOLD = 2 (init.cc)


def _proto_enabled(t: TuningTable, m: _Machine, algo: str, proto: str) -> bool:
    if algo not in ("ring", "tree"):
        return proto == "Simple"
    if proto != "LL128":
        return True
    # tuning.cc: LL128 only on NVLink inside the servers and on the GPU generations of the release
    # (an unnamed GPU counts as one of them, as the prior's "GPU" always did).
    if not m.nvlink or m.cc is None:
        return m.nvlink
    return m.cc >= 70 if t.ll128_ccs is None else m.cc in t.ll128_ccs


def _bandwidth(t: TuningTable, m: _Machine, coll: str, algo: str, proto: str) -> float:
    """comm->bandwidths[coll][algo][proto]: algBw in GB/s."""
    n, nodes = m.n, m.nodes
    nsteps = 2 * (n - 1) if coll == "allreduce" else n - 1 if coll in _AG_RS else n
    bus = _bus(t, m, coll, algo, proto)
    if algo in t.ag_rs_no_ratio and coll in _AG_RS:
        return bus
    if algo == "ring":
        return bus * n / nsteps
    if algo == "nvls":
        return bus * (t.nvls_ratio if t.nvls_ratio is not None else n / nsteps)
    if algo == "nvls_tree":
        r = t.nvls_tree_ratio
        return bus * (0.70 * nodes / (2 * (nodes - 1)) if r == "nodes" else n / nsteps if r is None else r)
    return bus * 0.5


def _bus(t: TuningTable, m: _Machine, coll: str, algo: str, proto: str) -> float:
    """busBw in GB/s: the graph's bandwidth x the protocol's and algorithm's factors, at most the ceilings."""
    nodes, i2, arch, nch = m.nodes, m.index2, m.arch, m.channels
    ll_max = t.ll_max_bw["volta" if nodes > 1 else arch][i2]  # across servers: the Intel CPU row
    ll128 = t.ll128_max_bw_per_collective
    bus = m.speed
    if algo.startswith("collnet"):
        heads = m.nics
        bw_intra, bw_inter = min(m.intra, m.nic_total) / heads, m.nic_total / heads
        bus = heads * bw_intra
    elif algo.startswith("nvls"):
        heads, bw_intra, bw_inter = m.nvls_graph()
        bus = _nvls_bus(t, m, coll, algo, heads, bw_intra, bw_inter)
    if m.busbw_cap is not None:
        bus = min(bus, m.busbw_cap)
    if algo == "ring" and proto == "LL":
        f = t.ring_ll_factor or (1 / 4 if nodes > 1 or coll in ("allreduce", "reduce") else 1 / 3)
        bus = min(ll_max, bus * f)
    if algo == "ring" and proto == "LL128":
        f = t.ring_ll128_ppn1_factor if t.ring_ll128_ppn1_factor and m.ppn < 2 else t.ring_ll128_factor
        bus = min(bus * f, nch * (ll128[coll] if ll128 else t.ring_ll128_max_bw[arch][i2]))
    if algo == "tree":
        bus = min(bus * t.tree_factor, nch * t.tree_max_bw[arch][i2])
        if proto == "LL":
            bus = min(bus * t.tree_ll_factor, ll_max)
        if proto == "LL128":
            f = t.tree_ll128_factor[0 if nodes == 1 else 1]
            bus = min(bus * f, nch * (ll128[coll] if ll128 else t.tree_ll128_max_bw[arch][i2]))
        if t.tree_pattern_factor and m.per_server == 1:  # search.cc: one GPU per server -> pattern TREE
            bus *= t.tree_pattern_factor
    if algo == "pat":
        bus *= t.pat_factor
    if algo.startswith("collnet"):
        bus = _collnet_bus(t, m, coll, algo, bus, bw_intra, bw_inter, heads)
    return bus


def _nvls_bus(t: TuningTable, m: _Machine, coll: str, algo: str, heads: int, bw_intra: float,
              bw_inter: float) -> float:
    rule, tree = t.nvls_bandwidth, algo == "nvls_tree"
    if rule == "ring-graph":  # 2.17: the ring graph's bandwidth (one server)
        return m.speed
    if rule == "graph":
        return heads * (bw_intra if m.nodes <= 2 else bw_inter)
    if rule == "efficiency":
        intra = bw_intra * t.nvls_efficiency[m.arch] * (heads - 1) / heads
        intra *= 2.0 if coll == "allreduce" else (m.ppn - 1) / m.ppn
        inter = bw_inter * (2 if tree and m.nodes <= 2 else 1)
        cap = t.nvls_tree_max_bw[m.arch][m.index2] if tree else math.inf
        return heads * min(intra, inter, cap)
    if rule == "min-ppn" and not tree and coll in _AG_RS:
        return heads * min(bw_intra * (m.ppn - 1) / m.ppn, bw_inter * 0.9)
    if tree:
        return heads * min(bw_intra, bw_inter if m.nodes <= 2 else bw_inter / 2)
    return heads * min(bw_intra, bw_inter)


def _collnet_bus(t: TuningTable, m: _Machine, coll: str, algo: str, bus: float, bw_intra: float,
                 bw_inter: float, heads: int) -> float:
    if t.collnet_factor:  # 2.9: one CollNet algorithm
        return bus * t.collnet_factor
    if algo == "collnet_chain":
        return bus * (t.collnet_chain_factor or 1.0)
    if "collnet_chain" not in t.algorithms:  # 2.10-2.13
        return bus
    ppn = m.ppn
    if coll in _AG_RS:
        if t.collnet_ag_rs == "min":
            return ppn * min(bw_intra, bw_inter * 0.9)
        w = (ppn - 1) / (8 - 1)  # "measured corrective ratio at 1 and 8 GPUs per server, interpolated"
        return ppn * bw_intra * (w * 0.85 + (1 - w) * 0.95)
    factor = ppn / heads  # GPU/NIC ratio
    bus /= factor - (factor - 1) / 2
    if t.collnet_direct_sm90_factor and m.cc is not None and m.cc >= 90:
        bus *= t.collnet_direct_sm90_factor
    return bus


def _log2i(x: int) -> int:
    return x.bit_length() - 1 if x > 0 else 0


def _latency(t: TuningTable, m: _Machine, coll: str, algo: str, proto: str) -> float:
    """comm->latencies[coll][algo][proto] in us."""
    p, n, nodes = PROTOCOLS.index(proto), m.n, m.nodes
    nsteps = 2 * (n - 1) if coll == "allreduce" else n - 1 if coll in _AG_RS else n
    base = t.base_lat_us[algo][p]
    intra_hw = "nvlink" if m.nvlink else "pci"
    intra = t.hw_lat_us[intra_hw][algo][p]
    inter = t.hw_lat_us["net"]["tree" if t.ppn1_tree_net_latency and m.per_server == 1 else algo][p]
    if t.ll_intra_factor and nodes > 1 and proto == "LL":
        intra *= t.ll_intra_factor
    local = m.per_server
    if algo == "ring":
        if coll in ("reduce", "broadcast"):  # rings that do not share channels: a step per rank
            hw = intra_hw if nodes == 1 else "net"
            return base + nsteps * t.hw_lat_us[hw]["tree" if proto == "Simple" else "ring"][p]
        if t.net_overhead_us and nodes > 1:
            intra = max(intra, t.net_overhead_us * (3 if proto == "Simple" else 1))
        ninter = 0 if nodes == 1 else 2 * (nodes - t.ring_inter_steps_offset) if coll == "allreduce" else nodes - 1
        return base + (nsteps - ninter) * intra + ninter * inter
    if algo == "tree":
        return base + 2 * ((local - 1) * intra + _log2i(nodes) * inter)
    if algo == "collnet_direct":
        if t.collnet_arity_us is None:
            return base + 2 * (local - 1) * intra + inter
        return base + 2 * (min(1, local - 1) * intra + (local - 1) * t.collnet_arity_us) + inter
    if algo == "collnet_chain":
        return base + 2 * (local - 1) * intra + (inter if t.collnet_chain_net_latency else 0)
    if algo == "pat":
        a, b, c = t.pat_latency_us
        return base + a + _log2i(nodes) * inter / b + n * c
    if t.nvls_latency == "base":
        return base
    if t.nvls_latency == "net-steps":
        net = t.hw_lat_us["net"][algo][p]
        return base + (net if nodes > 1 else 0) if algo == "nvls" else base + 2 * (nodes - 1) * net
    if algo == "nvls":
        return intra + (inter if nodes > 1 else 0)
    return base + intra + 2 * _log2i(nodes) * inter


def _times(t: TuningTable, m: _Machine, coll: str, algo: str, proto: str, algbw: float,
           size: np.ndarray) -> np.ndarray:
    """ncclTopoGetAlgoTime at every size, us."""
    bw = np.full(size.shape, algbw)
    lat = np.full(size.shape, _latency(t, m, coll, algo, proto))
    corrected = algo == "tree" or (algo == "nvls_tree" and t.nvls_tree_correction_cc is not None
                                   and m.cc is not None and m.cc >= t.nvls_tree_correction_cc)
    if corrected and coll == "allreduce":
        table = np.array(t.tree_correction[proto])
        chunks = (size // 64).astype(np.int64)
        log_size = np.array([int(c).bit_length() - 1 for c in chunks.ravel()]).reshape(size.shape)
        if not t.log2_zero_is_minus_one:
            log_size = np.maximum(log_size, 0)
        ok = (log_size >= 0) & (log_size < table.size)
        bw = np.where(ok, bw * table[np.clip(log_size, 0, table.size - 1)], bw)
    if algo == "ring" and proto == "Simple" and m.nodes > 1 and coll == "allreduce":
        plateau = size >= m.n / 16 * 65536 if t.plateau_threshold == "ranks" else \
            size // (m.channels * m.n) >= 64
        factor = [f for c, f in t.plateau_factors if (m.cc or 0) >= c][-1]
        lat = np.where(plateau, lat * factor, lat)
    return lat + size / (1000 * bw)


def nccl_estimates(cluster: ClusterModel, num_gpus: int, num_servers: int, sizes_bytes,
                   collective: str = "allreduce", *, collnet: bool | None = None) -> dict[tuple[str, str], np.ndarray]:
    """(algorithm, protocol) -> NCCL's estimated time in microseconds at every size, for the ones its
    version enables on this cluster, in NCCL's order (ties go to the first). `collnet`: the network
    offers SHARP (CollNet); None: what the cluster's `network.sharp` says. Point-to-point collectives
    (alltoall, sendrecv): {}."""
    if collective in POINT_TO_POINT:
        return {}
    if collective not in COLLECTIVES:
        raise ValueError(f"collective {collective!r}: NCCL's tuning model covers {', '.join(COLLECTIVES)} "
                         f"({', '.join(POINT_TO_POINT)} are point-to-point)")
    lib = cluster.library
    size = np.asarray(sizes_bytes, dtype=np.float64)
    table = table_of(lib.nccl_version)
    if table is LEGACY_TABLE:
        return under_env(cluster, num_gpus, num_servers, collective,
                          _legacy_estimates(cluster, num_gpus, num_servers, size, collective))
    m = _machine(cluster, table, num_gpus, num_servers, cluster.network.sharp if collnet is None else collnet)
    out = {}
    for algo in table.algorithms:
        if not _enabled(table, m, algo, collective, lib.algorithms):
            continue
        for proto in PROTOCOLS:
            if proto not in lib.protocols or not _proto_enabled(table, m, algo, proto):
                continue
            algbw = _bandwidth(table, m, collective, algo, proto)
            if algbw > 0:  # NCCL: a zero bandwidth disables the pair
                out[(algo, proto)] = _times(table, m, collective, algo, proto, algbw, size)
    return under_env(cluster, num_gpus, num_servers, collective, out)


def nccl_busbw_GBps(cluster: ClusterModel, num_gpus: int, num_servers: int, collective: str, algorithm: str,
                    protocol: str) -> float:
    """The busBw in GB/s NCCL's tuning model of the cluster's release gives a ring or tree with `protocol`
    (`ncclTopoTuneModel`, src/graph/tuning.cc: the graph's bandwidth x the protocol's factor, at most the
    release's ceilings such as llMaxBws), before it turns busBw into algBw. `nccl/library.py` costs LL by it
    where nothing was fitted."""
    if algorithm not in ("ring", "tree") or collective not in COLLECTIVES:
        raise ValueError(f"{algorithm}/{protocol} for {collective}: NCCL's busBw is given here for the ring and "
                         f"the tree of {', '.join(COLLECTIVES)}; ask for one of those")
    table = table_of(cluster.library.nccl_version)
    if table is LEGACY_TABLE:
        return _legacy_bus(cluster, num_gpus, num_servers, collective, algorithm, protocol)
    m = _machine(cluster, table, num_gpus, num_servers, cluster.network.sharp)
    return _bus(table, m, collective, algorithm, protocol)


def under_env(cluster: ClusterModel, num_gpus: int, num_servers: int, collective: str,
              estimates: dict[tuple[str, str], np.ndarray]) -> dict[tuple[str, str], np.ndarray]:
    """The entries (NCCL's estimates, or the cost model's candidates) of the pairs `library.nccl_env`
    (NCCL_ALGO, NCCL_PROTO, NCCL_NVLS_ENABLE) leaves on; a ValueError, as NCCL's "no algorithm/protocol
    available", when it leaves none."""
    env = cluster.library.nccl_env
    if not env:
        return estimates
    out = {k: v for k, v in estimates.items() if permitted(env, collective, *k)}
    if estimates and not out:
        said = " ".join(f"{k}={v}" for k, v in sorted(env.items()))
        raise ValueError(f"{said} leaves no algorithm and protocol NCCL {cluster.library.nccl_version} runs "
                         f"{collective} with on {num_gpus} GPUs of {num_servers} servers (it could run "
                         f"{', '.join(f'{a}/{p}' for a, p in estimates)}): change library.nccl_env")
    return out


def nccl_choices(cluster: ClusterModel, num_gpus: int, sizes_bytes, collective: str = "allreduce",
                 num_servers: int | None = None, *, collnet: bool | None = None) -> list[tuple[str, str]]:
    """The (algorithm, protocol) NCCL runs at every size: the lowest estimate, the first in NCCL's order
    (tree, ring, collnet_direct, collnet_chain, nvls, nvls_tree, pat) on ties."""
    g = cluster.server.gpus_per_server
    nodes = num_servers if num_servers is not None else max(1, -(-num_gpus // g))
    if collective in POINT_TO_POINT:
        return [("p2p", "Simple")] * np.size(sizes_bytes)
    est = nccl_estimates(cluster, num_gpus, nodes, sizes_bytes, collective, collnet=collnet)
    keys = list(est)
    best = np.stack([est[k] for k in keys]).argmin(axis=0)
    out = [keys[i] for i in np.atleast_1d(best)]
    if cluster.library.tuner:  # a tuner plugin's rule replaces the choice where NCCL can run its pair
        for i, size in enumerate(np.atleast_1d(np.asarray(sizes_bytes))):
            rule = tuned(cluster, num_gpus, nodes, collective, int(size))
            if rule is not None and (rule.algorithm, rule.protocol) in est:
                out[i] = (rule.algorithm, rule.protocol)
    return out


def tuned(cluster: ClusterModel, num_gpus: int, nodes: int, collective: str, size_bytes: int):
    """The cluster's tuner rule (`fabric/nccl_tuner.py`) for one call, None where NCCL's choice stands."""
    return tuner_rule(cluster.library.tuner, nodes, max(1, num_gpus // nodes), collective,
                      per_rank_bytes(size_bytes, num_gpus))



# fabriclab's model before versions were recorded, kept as it was (versions.LEGACY_TABLE: NCCL 2.7.8's constants,
# v2.7.8-1 src/graph/tuning.cc), with its own simplifications: LL128 on any NVSwitch server, sm80 read from
# `selection_busbw_cap_Bps`, trees only across servers, rings for broadcast/reduce that do not share channels.
def _legacy_estimates(cluster: ClusterModel, n: int, nodes: int, size: np.ndarray,
                      collective: str) -> dict[tuple[str, str], np.ndarray]:
    t, server, lib = LEGACY_TABLE, cluster.server, cluster.library
    nvlink = server.intra == "nvswitch"
    nsteps, ninter = (2 * (n - 1), 2 * (nodes - 1)) if collective == "allreduce" else \
        (n - 1, nodes - 1) if collective in _AG_RS else (n, nodes)
    intra_hw = "nvlink" if nvlink else "pci"
    out = {}
    for algo in ("tree", "ring"):
        if algo not in lib.algorithms or (algo == "tree" and (collective != "allreduce" or nodes == 1)):
            continue
        for p, proto in enumerate(PROTOCOLS):
            if proto not in lib.protocols or (proto == "LL128" and not nvlink):
                continue
            algbw = _legacy_bus(cluster, n, nodes, collective, algo, proto) * (n / nsteps if algo == "ring" else 0.5)
            hw = t.hw_lat_us
            intra_lat = hw[intra_hw][algo][p] * (1.8 if nodes > 1 and proto == "LL" else 1.0)
            lat = t.base_lat_us[algo][p]
            if algo == "ring" and collective in ("reduce", "broadcast"):
                lat += nsteps * hw["net" if nodes > 1 else intra_hw]["tree" if proto == "Simple" else "ring"][p]
            elif algo == "ring":
                lat += (nsteps - ninter) * intra_lat + ninter * hw["net"][algo][p]
            else:
                lat += 2 * ((n // nodes - 1) * intra_lat + int(math.log2(nodes)) * hw["net"][algo][p])
            lat, bw = np.full(size.shape, lat), np.full(size.shape, algbw)
            if algo == "tree":
                log_size = np.array([max(int(s) >> 6, 1).bit_length() - 1 for s in size])
                table = np.array(t.tree_correction[proto])
                bw = np.where(log_size < 22, bw * table[np.minimum(log_size, 21)], bw)
            if algo == "ring" and proto == "Simple" and nodes > 1 and collective == "allreduce":
                lat = np.where(size >= n / 16 * 65536, lat * 1.9, lat)
            out[(algo, proto)] = lat + size / (1000 * bw)
    return out


def _legacy_bus(cluster: ClusterModel, n: int, nodes: int, collective: str, algo: str, proto: str) -> float:
    """busBw in GB/s of the legacy model (v2.7.8-1 src/graph/tuning.cc)."""
    t, server, lib = LEGACY_TABLE, cluster.server, cluster.library
    intra_speed = server.intra_bandwidth_Bps if server.intra == "nvswitch" else server.pcie_bandwidth_Bps
    net_speed = min(intra_speed, server.nics_per_server * server.nic_bandwidth_Bps)
    speed = (intra_speed if nodes <= 2 else net_speed) / 1e9
    cap = lib.selection_busbw_cap_Bps
    sm80, channels = cap is not None, lib.num_channels
    bus = min(speed, cap / 1e9) if sm80 else speed
    if algo == "ring" and proto == "LL":
        bus *= 1 / 4 if (nodes > 1 or collective in ("allreduce", "reduce")) else 1 / 3
    if algo == "ring" and proto == "LL128":
        bus = min(bus * (0.7 if n / nodes < 2 else 0.92), t.ll128_max_bw_per_collective[collective] * channels)
    if algo == "tree":  # v2.7.8-1 maxTreeBw: a ceiling for all channels together
        max_tree = (105.0 if sm80 and proto == "LL128" else 80.0) if nodes > 2 else \
            (130.0 if sm80 and proto == "LL128" else 110.0)
        bus = min(bus * t.tree_factor, max_tree)
        if proto == "LL":
            bus *= t.tree_ll_factor
        if proto == "LL128":
            bus = min(bus * t.tree_ll128_factor[0 if nodes == 1 else 1],
                      t.ll128_max_bw_per_collective[collective] * channels * 7 / 9)
    return bus

"""ASTRA-sim's network, system and memory configurations for a fabriclab cluster.

The network (YAML, astra-network-analytical common/network-parser/NetworkParser.cpp) lists per dimension a
`topology` (Ring, Switch or FullyConnected), `npus_count` (more than 1 each; their product is the NPUs
simulated, rank r sitting at [r % n1, r // n1 % n2, ...]: congestion_unaware/multi-dim-topology
MultiDimTopology.cpp translate_address), `bandwidth` in GB/s of 2^30 bytes (common/NetworkFunction.cpp
bw_GBps_to_Bpns) and `latency` in ns per hop (a Switch is 2 hops, src -> switch -> dst; a FullyConnected 1;
a Ring the shorter way round). A message costs hops x latency + bytes / bandwidth of the first dimension
where its ends' addresses differ, with no contention in the congestion-unaware backend. Here dimension 1 is
the cluster's NVLink (or PCIe) domain, `gpus_per_server` GPUs on a Switch at the per-GPU internal bandwidth,
and dimension 2 the scale-out network, the servers on a Switch at each GPU's share of its server's NICs
(line rate x the library's efficiency, at most the GPU's PCIe link); its latency is the route's network
links (NIC -> leaf -> NIC under one leaf, through a spine beyond) x the cluster's hop latency, over ASTRA's
2 hops of a Switch.

The system (JSON, astra-sim/system/Sys.cc initialize_sys and astraccl/CollectiveImplLookup.cc) holds
`scheduling-policy` (LIFO, FIFO, EXPLICIT: the order of collectives waiting for a dimension),
`endpoint-delay` (ns a message spends between an NPU and its network end, system/MemBus.cc), `active-chunks-per-dimension` (chunks of a collective in
flight per dimension), `preferred-dataset-splits` (the chunks a collective is cut into),
`<collective>-implementation` per dimension (ring, oneRing, direct[window], oneDirect, halvingDoubling,
doubleBinaryTree), `collective-optimization` (baseline: each dimension runs the whole collective;
localBWAware: an all-reduce runs reduce-scatter up the dimensions and all-gather back down, the last one
all-reducing the smallest part), `local-mem-bw` (GB/s of 1e9 bytes) and `peak-perf` (TFLOP/s) for
`roofline-enabled` (COMP nodes cost num_ops / min(peak, bandwidth x num_ops / tensor_size); off, they
replay `duration_micros`), `replay-only` (every node, collectives included, replays its duration: never
set here, ASTRA-sim would then simulate no network), `trace-enabled`, `boost-mode` (read by none of this
version's code; ASTRA-sim's examples carry it). The algorithms are the ones NCCL runs on large buffers: a
ring for all-reduce, all-gather and reduce-scatter, direct sends for all-to-all. A collective on a group
smaller than all NPUs runs as one ring on a multi-dimensional network whatever these say
(system/CommunicatorGroup.cc). The memory (JSON, astra-memory-analytical AnalyticalRemoteMemory.cc) is
`NO_MEMORY_EXPANSION`: no remote memory, which no fabriclab trace uses.

Try it: `python -c "from fabriclab.bench.astra.configs import network_yaml, network_config;
from fabriclab.fabric.presets import cluster_preset; print(network_yaml(network_config(cluster_preset('dgx-h100'), 16)))"`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.workload.chakra import MIN_ALLGATHER_COMM_SIZE

GIB = 1 << 30  # ASTRA-sim's network "GB" (NetworkFunction.cpp: "1 GB is 2^30 B")
GB = 1e9  # its system file's GB/s and the TFLOP/s (Sys.cc: local_mem_bw * 1e9, peak_perf * 1e12)
SPLITS = 4  # preferred-dataset-splits of ASTRA-sim's own examples (examples/system/native_collectives)
ALGORITHMS = {"all-reduce": "ring", "all-gather": "ring", "reduce-scatter": "ring", "all-to-all": "direct"}
MEMORY = {"memory-type": "NO_MEMORY_EXPANSION"}


@dataclass(frozen=True, kw_only=True)
class Dimension:
    """One dimension of ASTRA-sim's analytical network."""

    topology: str
    """Ring, Switch or FullyConnected."""
    npus: int
    bandwidth_Bps: float
    """Per NPU, per direction, bytes/s."""
    latency_s: float
    """Per hop (a Switch is 2 hops)."""
    name: str = ""
    """What it stands for (comments only)."""


def network_config(cluster: ClusterModel, num_gpus: int) -> list[Dimension]:
    """The dimensions of `num_gpus` GPUs of `cluster`: its servers' internal fabric (an NVLink domain across
    trays as one dimension, `fabric/domains.py`), then the network."""
    from fabriclab.fabric.domains import domain_view

    cluster = domain_view(cluster, num_gpus)
    s = cluster.server
    gps = s.gpus_per_server
    if num_gpus < 2:
        raise ValueError(f"{num_gpus} GPU: ASTRA-sim simulates at least 2 NPUs; give 2 or more GPUs")
    if num_gpus > gps and num_gpus % gps:
        raise ValueError(f"{num_gpus} GPUs do not fill servers of {gps} (cluster {cluster.name}); ASTRA-sim's "
                         f"network is servers x GPUs per server: give a multiple of {gps}")
    dims = []
    if min(gps, num_gpus) > 1:
        dims.append(Dimension(topology="Switch", npus=min(gps, num_gpus), bandwidth_Bps=s.intra_bandwidth_Bps,
                              latency_s=s.intra_latency_s, name=f"{s.intra} inside a server"))
    servers = -(-num_gpus // gps)
    if servers > 1:
        share = s.nic_bandwidth_Bps * s.nic_efficiency * min(s.nics_per_server, gps) / gps
        # links of a route as fabric/rail.py builds the network: NIC -> leaf -> NIC where one leaf holds the
        # rail (rail-optimised) or every NIC (fat tree), else NIC -> leaf -> spine -> leaf -> NIC
        ports = servers * (1 if cluster.network.fabric == "rail" else s.nics_per_server)
        links = 2 if ports <= cluster.network.leaf_ports else 4
        dims.append(Dimension(topology="Switch", npus=servers, bandwidth_Bps=min(share, s.pcie_bandwidth_Bps),
                              latency_s=links * s.nic_latency_s / 2, name=f"{cluster.network.fabric} network"))
    return dims


def snake_ring(members, npus_per_server: int) -> list[int]:
    """A group's ranks in the ring order that crosses servers between GPUs of the same local index: the
    servers in order, inside each the GPUs by local index, ascending and descending in turn. ASTRA-sim
    costs a ring hop on the first dimension where the two ranks' addresses differ
    (astra-network-analytical `MultiDimTopology.cpp`), so a hop from GPU 3 of one server to GPU 0 of the
    next would be costed on NVLink; NCCL's rings cross between GPUs of one rail, as here."""
    servers: dict[int, list[int]] = {}
    for r in sorted(members):
        servers.setdefault(r // npus_per_server, []).append(r)
    out: list[int] = []
    for k, (_, ranks) in enumerate(sorted(servers.items())):
        out += ranks if k % 2 == 0 else ranks[::-1]
    return out


def network_yaml(dims: list[Dimension]) -> str:
    """The network file's text."""
    def row(values) -> str:
        return "[ " + ", ".join(values) + " ]"

    return "\n".join([
        f"# fabriclab: {' x '.join(f'{d.npus} ({d.name})' for d in dims)}",
        f"topology: {row(d.topology for d in dims)}",
        f"npus_count: {row(str(d.npus) for d in dims)}",
        f"bandwidth: {row(repr(d.bandwidth_Bps / GIB) for d in dims)}  # GB/s of 2^30 bytes",
        f"latency: {row(repr(d.latency_s * 1e9) for d in dims)}  # ns per hop", ""])


def system_config(num_dims: int, *, roofline: bool = False, peak_flops: float = 0.0,
                  memory_bandwidth_Bps: float = 0.0, algorithms: dict[str, str] | None = None) -> dict:
    """The system file's keys for a network of `num_dims` dimensions; `roofline`: cost COMP nodes from
    their num_ops and tensor_size at `peak_flops` (FLOP/s) and `memory_bandwidth_Bps`, else replay them."""
    if roofline and not (peak_flops > 0 and memory_bandwidth_Bps > 0):
        raise ValueError("a roofline needs the GPU's peak FLOP/s and memory bandwidth, both > 0")
    assert SPLITS <= MIN_ALLGATHER_COMM_SIZE, "an all-gather of the smallest comm_size written would never end"
    impl = {**ALGORITHMS, **(algorithms or {})}
    return {"scheduling-policy": "FIFO",  # NCCL runs a stream's collectives in the order they were issued
            "endpoint-delay": 10,  # ns, ASTRA-sim's default (Sys.cc)
            "active-chunks-per-dimension": 1, "preferred-dataset-splits": SPLITS,
            **{f"{c}-implementation": [a] * num_dims for c, a in impl.items()},
            "collective-optimization": "localBWAware",
            "local-mem-bw": memory_bandwidth_Bps / GB, "peak-perf": peak_flops / 1e12,
            "roofline-enabled": int(roofline), "replay-only": 0, "trace-enabled": 0, "boost-mode": 0}


@dataclass(frozen=True, kw_only=True)
class ConfigFiles:
    """The three files ASTRA-sim takes besides the traces."""

    network: Path
    system: Path
    memory: Path


def write_configs(folder: Path, cluster: ClusterModel, num_gpus: int, *, roofline: bool = False,
                  peak_flops: float = 0.0) -> ConfigFiles:
    """Write `network.yml`, `system.json` and `memory.json` for `num_gpus` GPUs of `cluster` into `folder`."""
    from fabriclab.fabric.cluster import cluster_gpu

    dims = network_config(cluster, num_gpus)
    memory_bw = cluster_gpu(cluster).memory_bandwidth_Bps if roofline else 0.0
    files = ConfigFiles(network=folder / "network.yml", system=folder / "system.json", memory=folder / "memory.json")
    folder.mkdir(parents=True, exist_ok=True)
    files.network.write_text(network_yaml(dims))
    system = system_config(len(dims), roofline=roofline, peak_flops=peak_flops, memory_bandwidth_Bps=memory_bw)
    files.system.write_text(json.dumps(system, indent=2) + "\n")
    files.memory.write_text(json.dumps(MEMORY) + "\n")
    return files

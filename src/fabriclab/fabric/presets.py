"""Cluster presets: the machines of the papers and of today, each one function returning a cluster.

A preset is a `ClusterModel` built from data sheets and NCCL's own constants (a *prior*: `fabriclab
calibrate nccl-tests` moves what real logs determine). Every command that takes `--cluster FILE` also
takes a preset name. Every preset carries its GPU's roofline (`compute`, from `fabric/gpus.py`, whose
docstring cites each GPU's data sheet) with no efficiency: that is measured (`fabriclab calibrate step`).
Sources:

* `tx-gaia-25gbe`, `tx-gaia-opa`: MIT Lincoln Laboratory's TX-GAIA as Samsi et al. ("Benchmarking network
  fabrics for data distributed training of deep neural networks", HPEC 2020) describe it: 2 V100 per node
  (PCIe 3.0), one 25 GbE (RoCE) or one 100 Gb Omni-Path NIC per node, a fat tree.
* `a100-hdr`: Azure ND A100 v4, the servers of the shipped nccl-tests logs: 8 A100-SXM4-40GB on
  NVSwitch (NVLink 3, 300 GB/s per direction per GPU), 8 x 200 Gb/s HDR InfiniBand, rail-optimised.
* `dgx-a100`: NVIDIA DGX A100 (data sheet): 8 A100-SXM4-80GB (HBM2e 2.04 TB/s) on NVSwitch, 8 x 200 Gb/s
  HDR (ConnectX-6) for compute, PCIe 4.0; rail-optimised as the DGX SuperPOD reference architecture
  (QM8700 leaves of 40 ports: 20 down, 20 up).
* `dgx-h100`: NVIDIA DGX H100 (data sheet): 8 H100-SXM5-80GB (HBM3 3.35 TB/s) on NVSwitch (NVLink 4,
  450 GB/s per direction per GPU), 8 x 400 Gb/s NDR (ConnectX-7), PCIe 5.0; rail-optimised as the DGX
  H100 SuperPOD (QM9700 leaves of 64 ports: 32 down, 32 up).
* `roce-h100`: `dgx-h100`'s servers on a RoCE cloud fabric: a plain (not rail-optimised) Ethernet fat tree
  of 64-port leaves, ECMP hashing each of NCCL's flows (1 QP per connection, NCCL's default) and DCQCN with
  PFC, as Alibaba's HPN and ByteDance's MegaScale describe their RoCE clusters (SIGCOMM 2024, NSDI 2024) and as
  SimAI's ns-3 configuration models them (`nccl/congestion.py`). (Meta's RoCE clusters run without DCQCN:
  "RDMA over Ethernet for Distributed AI Training at Meta Scale", SIGCOMM 2024.)
* `ib-h100-ar`: `dgx-h100` with the adaptive routing of NVIDIA's Quantum-2 switches, which the DGX SuperPOD
  reference architecture enables on its compute fabric, and InfiniBand's credit flow control.
* `dgx-h100-campus`: `dgx-h100` servers over buildings of 8,192 (65,536 GPUs), joined by a third tier
  (`fabric/buildings.py`; its bandwidth and latency are illustrative, below).
* `hgx-h200`: NVIDIA HGX H200 / DGX H200 (data sheets): 8 H200-SXM-141GB (HBM3e 4.8 TB/s) on NVSwitch
  (NVLink 4, 450 GB/s per direction per GPU), 8 x 400 Gb/s NDR (ConnectX-7), PCIe 5.0; rail-optimised on
  QM9700 leaves of 64 ports (32 down, 32 up), as `dgx-h100`.
* `hgx-b200`: 8 B200 (NVIDIA HGX B200 specifications: 180 GB HBM3e at 7.7 TB/s per GPU, NVLink 5 at
  1.8 TB/s both ways, i.e. 900 GB/s per direction, and "PCIe Gen5: 128GB/s", i.e. PCIe 5.0 x16) with one
  800 Gb/s NIC per GPU: XDR InfiniBand (ConnectX-8 SuperNIC). NVIDIA's own DGX B200 ships 8 x 400 Gb/s
  ConnectX-7 (DGX B200 user guide); this preset is the 800G-per-GPU build. Its GPU reaches its NIC over
  PCIe 5.0 x16, 63 GB/s per direction, less than 800 Gb/s (100 GB/s): a GPU's traffic to the network is
  PCIe-bound in this model (ConnectX-8 reaches 800 Gb/s on PCIe 5.0 only with two x16 links, Socket
  Direct: NVIDIA DOCA 2.9 CX8 release notes). Rail-optimised on leaves of 64 ports at 800 Gb/s (32 down,
  32 up: the radix of a Spectrum-4 SN5600; a Quantum-X800 Q3400 has 144 XDR ports, 72 down / 72 up).
* `dgx-h200`: NVIDIA DGX H200 (data sheet): 8 H200-SXM-141GB on NVSwitch (NVLink 4, 900 GB/s both ways per
  GPU), 8 single-port ConnectX-7 at 400 Gb/s (NDR) for compute, PCIe 5.0; rail-optimised as `dgx-h100`.
  (`hgx-h200` is the same baseboard as an OEM server.)
* `hgx-b300`: NVIDIA HGX B300 (HGX specifications, "HGX B300" column): 8 B300 (Blackwell Ultra, 288 GB
  HBM3e), NVLink 5 (1.8 TB/s both ways per GPU, 14.4 TB/s per 8), "networking bandwidth 1.6 TB/s" = 8 x 800
  Gb/s both ways: one ConnectX-8 SuperNIC per GPU, whose integrated PCIe 6.0 switch joins GPU and NIC
  (PCIe 6.0 x16); XDR InfiniBand on Quantum-X800 Q3400 leaves (144 ports: 72 down, 72 up).
* `gb200-nvl72`: NVIDIA GB200 NVL72 (product page): 72 Blackwell GPUs and 36 Grace CPUs in one NVLink domain
  (NVLink 5, 130 TB/s = 72 x 1.8 TB/s both ways: one switch hop between any two GPUs, `fabric/domains.py`),
  18 compute trays of 4 GPUs (2 GB200 superchips); per tray 4 ConnectX-7 at 400 Gb/s (NDR) for the compute
  network over PCIe 5.0 (NVIDIA DGX GB200 user guide: 4 x OSFP ConnectX-7 per compute tray); rail-optimised
  on Quantum-2 QM9700 leaves (32 down, 32 up), as `dgx-h100`.
* `gb300-nvl72`: NVIDIA GB300 NVL72 (product page): 72 Blackwell Ultra GPUs, the same NVLink 5 domain and 18
  trays of 4; 72 ConnectX-8 SuperNICs at 800 Gb/s (one per GPU, on PCIe 6.0), XDR on Quantum-X800 Q3400 leaves.

Every preset but `roce-h100` and `ib-h100-ar` routes `ideal` (D-mod-K) over an `ideal` transport, the flow
model (`nccl/routing.py`, `nccl/congestion.py`); `--routing`, `--transport` or a cluster file says otherwise.

Try it: `fabriclab simulate collective --cluster hgx-b200 --gpus 64 --sizes 1MB,1GB`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from fabriclab.fabric.cluster import ClusterModel, ComputeSpec, a100_hdr_prior, prior_cluster
from fabriclab.fabric.gpus import gpu_preset
from fabriclab.fabric.links import link_preset


def tx_gaia(nic: str = "25GbE") -> ClusterModel:
    """TX-GAIA nodes of Samsi et al.: 2 V100 (PCIe 3.0) sharing one NIC, `25GbE` or `OPA100`."""
    name = {"25GbE": "tx-gaia-25gbe", "OPA100": "tx-gaia-opa"}[nic]
    gpu = gpu_preset("v100-pcie")
    return prior_cluster(gpus_per_server=2, gpu_name="Tesla V100-PCIE-32GB", intra="pcie",
                         intra_link=link_preset("PCIe3x16"), pcie=link_preset("PCIe3x16"), nic=link_preset(nic),
                         nics_per_server=1, fabric="fat-tree", name=name, memory_bandwidth_Bps=gpu.memory_bandwidth_Bps,
                         compute=ComputeSpec(gpu=gpu),
                         description=f"preset: TX-GAIA (Samsi et al.), 2 V100 over PCIe 3.0, one {nic} NIC "
                                     f"per node, fat tree; NCCL 2.9 cost-model constants")


# The NCCL release a DGX runs today (PyTorch 2.8-2.9 wheels ship NCCL 2.27): its tuning model and latencies.
CURRENT_NCCL = "2.27.7"
# What one channel of LL128 moves at most on the GPU generation, in that release (v2.27.7-1 src/graph/tuning.cc,
# perChMaxRingLL128Bws: Ampere 20.0, Hopper 36.7, Blackwell 2 x 36.7 GB/s); a prior cluster's is NCCL 2.7.8's
# 16.7 (A100), which held a B200 below an H200 wherever NCCL picks LL128.
_LL128_PER_CHANNEL_GBPS = {"ampere": 20.0, "hopper": 36.7, "blackwell": 2 * 36.7}


def _current_nccl(cluster: ClusterModel, generation: str) -> ClusterModel:
    """`cluster` with the LL128 ceiling of its GPU generation in CURRENT_NCCL, over all its channels."""
    lib = cluster.library
    ll128 = replace(lib.protocols["LL128"], busbw_cap_Bps=_LL128_PER_CHANNEL_GBPS[generation] * 1e9 * lib.num_channels)
    return replace(cluster, library=replace(lib, protocols={**lib.protocols, "LL128": ll128}))


def dgx_a100() -> ClusterModel:
    """NVIDIA DGX A100: 8 A100-SXM4-80GB, NVSwitch, 8 x HDR, rail-optimised."""
    gpu = gpu_preset("a100-80gb")
    cluster = prior_cluster(gpus_per_server=8, gpu_name=gpu.name, nic=link_preset("HDR"),
                            pcie=link_preset("PCIe4x16"), name="dgx-a100",
                            memory_bandwidth_Bps=gpu.memory_bandwidth_Bps, leaf_ports=20, nccl_version=CURRENT_NCCL,
                            compute=ComputeSpec(gpu=gpu),
                            description=f"preset: NVIDIA DGX A100 (8 A100-SXM4-80GB, NVSwitch, 8 x HDR), "
                                        f"rail-optimised; NCCL {CURRENT_NCCL}'s own constants")
    return _current_nccl(cluster, "ampere")


def dgx_h100() -> ClusterModel:
    """NVIDIA DGX H100: 8 H100-SXM5-80GB, NVSwitch, 8 x NDR, rail-optimised."""
    gpu = gpu_preset("h100")
    cluster = prior_cluster(gpus_per_server=8, gpu_name=gpu.name, nic=link_preset("NDR"),
                            pcie=link_preset("PCIe5x16"), name="dgx-h100",
                            memory_bandwidth_Bps=gpu.memory_bandwidth_Bps, leaf_ports=32, nccl_version=CURRENT_NCCL,
                            compute=ComputeSpec(gpu=gpu),
                            description=f"preset: NVIDIA DGX H100 (8 H100-SXM5-80GB, NVSwitch, 8 x NDR), "
                                        f"rail-optimised; NCCL {CURRENT_NCCL}'s own constants")
    return _current_nccl(cluster, "hopper")


def roce_h100() -> ClusterModel:
    """DGX H100 servers on a RoCE Ethernet fabric: a plain fat tree, ECMP, DCQCN + PFC (module doc)."""
    cluster = dgx_h100()
    network = replace(cluster.network, fabric="fat-tree", routing="ecmp", qps_per_connection=1, transport="roce")
    return replace(cluster, name="roce-h100", network=network,
                   description="preset: DGX H100 servers (8 x 400 Gb/s RoCE NICs) on a plain Ethernet fat tree of "
                               "64-port leaves (32 down, 32 up), ECMP with 1 QP per connection, DCQCN + PFC; "
                               f"NCCL {CURRENT_NCCL}'s own constants")


def ib_h100_ar() -> ClusterModel:
    """DGX H100 SuperPOD with Quantum-2 adaptive routing: `dgx-h100` with routing adaptive, transport ib."""
    cluster = dgx_h100()
    network = replace(cluster.network, routing="adaptive", transport="ib")
    return replace(cluster, name="ib-h100-ar", network=network,
                   description=cluster.description + "; InfiniBand adaptive routing, credit flow control")


# A campus of buildings of 8,192 DGX H100 (65,536 GPUs: a large data hall of today; a building is simulated in
# full, so its size sets the time of a prediction, `fabric/buildings.py`), joined by a third tier at a quarter of
# a building's NIC bandwidth (8 x 400 Gb/s x 8,192 / 4 = 6.6 Pb/s) and 20 us one way (about 4 km of fibre at
# 5 us per km). Illustrative values: no campus publishes its inter-building links.
CAMPUS_SERVERS_PER_BUILDING = 8192
CAMPUS_TIER_SHARE = 0.25
CAMPUS_LATENCY_S = 20e-6


def dgx_h100_campus() -> ClusterModel:
    """DGX H100 servers spread over buildings of 8,192 servers, joined by a third tier (`fabric/buildings.py`)."""
    cluster = dgx_h100()
    s = cluster.server
    tier_Bps = CAMPUS_TIER_SHARE * CAMPUS_SERVERS_PER_BUILDING * s.nics_per_server * s.nic_bandwidth_Bps
    network = replace(cluster.network, servers_per_building=CAMPUS_SERVERS_PER_BUILDING,
                      building_bandwidth_Bps=tier_Bps, building_latency_s=CAMPUS_LATENCY_S)
    return replace(cluster, name="dgx-h100-campus", network=network,
                   description=cluster.description + f"; over buildings of {CAMPUS_SERVERS_PER_BUILDING:,} servers, "
                               f"a third tier of {tier_Bps * 8 / 1e15:.1f} Pb/s per building and "
                               f"{CAMPUS_LATENCY_S * 1e6:.0f} us")


def _nvswitch_preset(name: str, gpu_key: str, gpus: int, nvlink: str, nic: str, pcie: str, leaf_ports: int,
                     generation: str, what: str, suffix: str = "") -> ClusterModel:
    """A server of `gpus` GPUs on NVSwitch with a NIC per GPU, rail-optimised, with CURRENT_NCCL's constants."""
    gpu = gpu_preset(gpu_key)
    cluster = prior_cluster(gpus_per_server=gpus, gpu_name=gpu.name, intra_link=link_preset(nvlink),
                            nic=link_preset(nic), pcie=link_preset(pcie), name=name,
                            memory_bandwidth_Bps=gpu.memory_bandwidth_Bps, leaf_ports=leaf_ports,
                            nccl_version=CURRENT_NCCL, compute=ComputeSpec(gpu=gpu),
                            description=f"preset: {what}, rail-optimised; NCCL {CURRENT_NCCL}'s own constants{suffix}")
    return _current_nccl(cluster, generation)


def hgx_h200() -> ClusterModel:
    """NVIDIA HGX H200: 8 H200-SXM-141GB, NVSwitch (NVLink 4), 8 x NDR, rail-optimised."""
    return _nvswitch_preset("hgx-h200", "h200", 8, "NVLink-H100", "NDR", "PCIe5x16", 32, "hopper",
                            "NVIDIA HGX H200 (8 H200-SXM-141GB, NVSwitch NVLink 4, 8 x NDR)")


def hgx_b200() -> ClusterModel:
    """NVIDIA HGX B200 with 800G NICs: 8 B200, NVSwitch (NVLink 5), 8 x XDR, PCIe 5.0, rail-optimised."""
    return _nvswitch_preset("hgx-b200", "b200", 8, "NVLink-B200", "XDR", "PCIe5x16", 32, "blackwell",
                            "NVIDIA HGX B200 (8 B200-SXM-180GB, NVSwitch NVLink 5, 8 x XDR 800 Gb/s behind PCIe 5.0)")


def dgx_h200() -> ClusterModel:
    """NVIDIA DGX H200: the HGX H200 baseboard, 8 x NDR, rail-optimised."""
    cluster = hgx_h200()
    return replace(cluster, name="dgx-h200", description=cluster.description.replace("HGX H200", "DGX H200"))


def hgx_b300() -> ClusterModel:
    """NVIDIA HGX B300: 8 B300, NVSwitch (NVLink 5), 8 x ConnectX-8 XDR on PCIe 6.0, rail-optimised."""
    return _nvswitch_preset("hgx-b300", "b300", 8, "NVLink-B200", "XDR", "PCIe6x16", 72, "blackwell",
                            "NVIDIA HGX B300 (8 B300-SXM-288GB, NVSwitch NVLink 5, 8 x ConnectX-8 XDR 800 Gb/s on "
                            "PCIe 6.0)")


# An NVL72 rack: 18 compute trays of 4 GPUs in one NVLink domain of 72 (GB200 / GB300 NVL72 product pages).
NVL72_TRAY_GPUS = 4
NVL72_DOMAIN_GPUS = 72


def _nvl72(name: str, gpu_key: str, nic: str, pcie: str, leaf_ports: int, what: str) -> ClusterModel:
    cluster = _nvswitch_preset(name, gpu_key, NVL72_TRAY_GPUS, "NVLink-B200", nic, pcie, leaf_ports, "blackwell",
                               f"{what}, one NVLink 5 domain of {NVL72_DOMAIN_GPUS} GPUs "
                               f"({NVL72_DOMAIN_GPUS // NVL72_TRAY_GPUS} trays of {NVL72_TRAY_GPUS})",
                               " (multi-node NVLink)")
    # Ring channels follow a GPU's NVLinks (18 per GPU on Hopper and Blackwell, NVIDIA/nccl#1429), not its NICs:
    # as on an 8-GPU HGX of the same NVLink generation, 16 (the prior's 2 per NIC counts a tray's 4 NICs only).
    cluster = replace(cluster, server=replace(cluster.server, gpus_per_domain=NVL72_DOMAIN_GPUS),
                      library=replace(cluster.library, num_channels=16))
    return _current_nccl(cluster, "blackwell")


def gb200_nvl72() -> ClusterModel:
    """NVIDIA GB200 NVL72: 72 GB200 GPUs in one NVLink domain, trays of 4 with 4 x ConnectX-7 NDR each."""
    return _nvl72("gb200-nvl72", "gb200", "NDR", "PCIe5x16", 32,
                  "NVIDIA GB200 NVL72 (72 Blackwell GPUs of 186 GB, 4 x ConnectX-7 NDR 400 Gb/s per tray)")


def gb300_nvl72() -> ClusterModel:
    """NVIDIA GB300 NVL72: 72 Blackwell Ultra GPUs in one NVLink domain, a ConnectX-8 XDR per GPU."""
    return _nvl72("gb300-nvl72", "gb300", "XDR", "PCIe6x16", 72,
                  "NVIDIA GB300 NVL72 (72 Blackwell Ultra GPUs of 278 GB, a ConnectX-8 XDR 800 Gb/s per GPU on "
                  "PCIe 6.0)")


PRESETS: dict[str, Callable[[], ClusterModel]] = {
    "tx-gaia-25gbe": lambda: tx_gaia("25GbE"),
    "tx-gaia-opa": lambda: tx_gaia("OPA100"),
    "a100-hdr": a100_hdr_prior,
    "dgx-a100": dgx_a100,
    "dgx-h100": dgx_h100,
    "dgx-h100-campus": dgx_h100_campus,
    "roce-h100": roce_h100,
    "ib-h100-ar": ib_h100_ar,
    "hgx-h200": hgx_h200,
    "dgx-h200": dgx_h200,
    "hgx-b200": hgx_b200,
    "hgx-b300": hgx_b300,
    "gb200-nvl72": gb200_nvl72,
    "gb300-nvl72": gb300_nvl72,
}


def cluster_preset(name: str) -> ClusterModel:
    """The preset `name` (case-insensitive); a ValueError lists them."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise ValueError(f"no cluster preset {name!r}: use one of {', '.join(PRESETS)} or a cluster file")
    return PRESETS[key]()

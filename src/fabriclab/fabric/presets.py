"""Cluster presets: the machines of the papers and of today, each one function returning a cluster.

A preset is a `ClusterModel` built from data sheets and NCCL's own constants (a *prior*: `fabriclab
calibrate nccl-tests` moves what real logs determine). Every command that takes `--cluster FILE` also
takes a preset name. Sources:

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

Try it: `fabriclab simulate collective --cluster dgx-h100 --gpus 64 --sizes 1MB,1GB`.
"""

from __future__ import annotations

from collections.abc import Callable

from fabriclab.fabric.cluster import ClusterModel, a100_hdr_prior, prior_cluster
from fabriclab.fabric.links import link_preset


def tx_gaia(nic: str = "25GbE") -> ClusterModel:
    """TX-GAIA nodes of Samsi et al.: 2 V100 (PCIe 3.0) sharing one NIC, `25GbE` or `OPA100`."""
    name = {"25GbE": "tx-gaia-25gbe", "OPA100": "tx-gaia-opa"}[nic]
    return prior_cluster(gpus_per_server=2, gpu_name="Tesla V100-PCIE-32GB", intra="pcie",
                         intra_link=link_preset("PCIe3x16"), pcie=link_preset("PCIe3x16"), nic=link_preset(nic),
                         nics_per_server=1, fabric="fat-tree", name=name, memory_bandwidth_Bps=0.9e12,
                         description=f"preset: TX-GAIA (Samsi et al.), 2 V100 over PCIe 3.0, one {nic} NIC "
                                     f"per node, fat tree; NCCL 2.9 cost-model constants")


# The NCCL release a DGX runs today (PyTorch 2.8-2.9 wheels ship NCCL 2.27): its tuning model and latencies.
CURRENT_NCCL = "2.27.7"


def dgx_a100() -> ClusterModel:
    """NVIDIA DGX A100: 8 A100-SXM4-80GB, NVSwitch, 8 x HDR, rail-optimised."""
    return prior_cluster(gpus_per_server=8, gpu_name="A100-SXM4-80GB", nic=link_preset("HDR"),
                         pcie=link_preset("PCIe4x16"), name="dgx-a100", memory_bandwidth_Bps=2.039e12,
                         leaf_ports=20, nccl_version=CURRENT_NCCL,
                         description=f"preset: NVIDIA DGX A100 (8 A100-SXM4-80GB, NVSwitch, 8 x HDR), "
                                     f"rail-optimised; NCCL {CURRENT_NCCL}'s own constants")


def dgx_h100() -> ClusterModel:
    """NVIDIA DGX H100: 8 H100-SXM5-80GB, NVSwitch, 8 x NDR, rail-optimised."""
    return prior_cluster(gpus_per_server=8, gpu_name="H100-SXM5-80GB", nic=link_preset("NDR"),
                         pcie=link_preset("PCIe5x16"), name="dgx-h100", memory_bandwidth_Bps=3.35e12,
                         leaf_ports=32, nccl_version=CURRENT_NCCL,
                         description=f"preset: NVIDIA DGX H100 (8 H100-SXM5-80GB, NVSwitch, 8 x NDR), "
                                     f"rail-optimised; NCCL {CURRENT_NCCL}'s own constants")


PRESETS: dict[str, Callable[[], ClusterModel]] = {
    "tx-gaia-25gbe": lambda: tx_gaia("25GbE"),
    "tx-gaia-opa": lambda: tx_gaia("OPA100"),
    "a100-hdr": a100_hdr_prior,
    "dgx-a100": dgx_a100,
    "dgx-h100": dgx_h100,
}


def cluster_preset(name: str) -> ClusterModel:
    """The preset `name` (case-insensitive); a ValueError lists them."""
    key = name.strip().lower()
    if key not in PRESETS:
        raise ValueError(f"no cluster preset {name!r}: use one of {', '.join(PRESETS)} or a cluster file")
    return PRESETS[key]()

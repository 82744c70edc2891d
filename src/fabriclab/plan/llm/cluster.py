"""An LLM plan's cluster options: a cluster with another NIC rate, network or bisection (`vary_cluster`), the
options `plan --nic-rates --fabrics --bisection` compares and `whatif llm --nic-rate --fabric --bisection`
and `cluster show|export` apply; and where a PCIe path caps the NICs (`pcie_cap`).

Try it: `fabriclab cluster show dgx-h100 --nic-rate 800Gbps` (an 800G NIC behind PCIe Gen5 x16: ~461 Gb/s).
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from fabriclab.fabric.cluster import ROUTINGS, ClusterModel

FABRICS = ("rail", "fat-tree")


def vary_cluster(base: ClusterModel, *, nic_rate_Bps: float | None = None, fabric: str | None = None,
                 bisection: Fraction | float | None = None, routing: str | None = None) -> ClusterModel:
    """`base` with another NIC line rate per GPU, network between the servers (rail or fat-tree) or bisection:
    an option of `plan` (`--nic-rates`, `--fabrics`, `--bisection`) and the cluster `whatif llm --nic-rate
    --fabric --bisection` simulates; None keeps the cluster's own."""
    if fabric is not None and fabric not in FABRICS:
        raise ValueError(f"network {fabric!r}: with an LLM the network between the servers is "
                         f"{' or '.join(FABRICS)} (the NIC rate per GPU is a rate, e.g. 400Gbps)")
    if routing is not None and routing not in ROUTINGS:
        raise ValueError(f"routing {routing!r}: use one of {', '.join(ROUTINGS)}")
    if bisection is not None and not 0 < bisection <= 1:
        raise ValueError(f"bisection {bisection}: give a ratio in (0, 1], e.g. 1/2")
    server = base.server if nic_rate_Bps is None else replace(base.server, nic_bandwidth_Bps=nic_rate_Bps)
    network = replace(base.network, fabric=fabric or base.network.fabric,
                      bisection=base.network.bisection if bisection is None else float(bisection),
                      routing=routing or base.network.routing)
    return replace(base, server=server, network=network)


def pcie_cap(cluster: ClusterModel, name: str | None = None) -> str | None:
    """A sentence when the GPU-to-NIC PCIe path is slower than the NIC and caps it (an 800G NIC behind
    PCIe Gen5 x16: ~461 Gb/s), else None; `name`: the cluster's in the sentence (default its own)."""
    s = cluster.server
    nic = s.nic_bandwidth_Bps * s.nic_efficiency
    if s.pcie_bandwidth_Bps >= nic:
        return None
    return (f"{name or cluster.name}: each {s.nic_bandwidth_Bps * 8 / 1e9:g} Gb/s NIC runs at most "
            f"{s.pcie_bandwidth_Bps * 8 / 1e9:.0f} Gb/s: the GPU-to-NIC PCIe path "
            f"({s.pcie_bandwidth_Bps / 1e9:.1f} GB/s a direction) caps it; a faster NIC needs a faster PCIe")

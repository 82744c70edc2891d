"""An LLM plan's cluster options: a cluster with another NIC rate, network or bisection (`vary_cluster`), the
options `plan --nic-rates --fabrics --bisection` compares and `whatif llm --nic-rate --fabric --bisection`
and `cluster show|export` apply; and where a PCIe path caps the NICs (`pcie_cap`; `pcie_lines`: once per cause
over a plan's options).

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
    body = _pcie_body(cluster)
    return None if body is None else f"{name or cluster.name}: {body}"


def _pcie_body(cluster: ClusterModel) -> str | None:
    s = cluster.server
    nic = s.nic_bandwidth_Bps * s.nic_efficiency
    if s.pcie_bandwidth_Bps >= nic:
        return None
    return (f"each {s.nic_bandwidth_Bps * 8 / 1e9:g} Gb/s NIC runs at most {s.pcie_bandwidth_Bps * 8 / 1e9:.0f} Gb/s: "
            f"the GPU-to-NIC PCIe path ({s.pcie_bandwidth_Bps / 1e9:.1f} GB/s a direction) caps it; a faster NIC "
            f"needs a faster PCIe")


def pcie_lines(options: list[tuple[str, str, ClusterModel]]) -> list[str]:
    """One sentence per distinct PCIe cap over a plan's options (label, cluster name, cluster): `pcie_cap`'s
    for one option; for several with the same cap, the clusters named once with how many options it concerns
    (a cap is the server's: every network, bisection and routing of it shares it)."""
    groups: dict[str, list[tuple[str, str]]] = {}
    for label, name, cluster in options:
        body = _pcie_body(cluster)
        if body is not None:
            groups.setdefault(body, []).append((label, name))
    lines = []
    for body, named in groups.items():
        if len(named) == 1:
            lines.append(f"{named[0][0]}: {body}")
        else:
            lines.append(f"{', '.join(dict.fromkeys(n for _, n in named))} ({len(named)} options): {body}")
    return lines

"""What the network of one plan option costs: NICs, switch ports and cables of a fat tree, counted.

**Counting** (a tree as `fabric.FatTreeShape`, XGFT(h; m_1..m_h; w_1..w_h); H servers; level 0 the
servers, level l its switches). Between level l and l+1 there are `nodes_at(l) * w_{l+1}` links.

* NICs: one per host of the tree (`gpus_per_server / nics_per_server` GPUs share it, `fabric.hosts`): H.
* Cables: the H server-to-leaf links are `host_cable`s (short copper); every switch-to-switch link is
  a `switch_cable` (an optical cable, or two optics and fibre).
* Switch ports: each link ends in one switch port at its upper end, and in a second one at its lower
  end when that is a switch (not a NIC): ports = H + 2 * (switch-to-switch links).

So a 2-level tree of H servers, k per leaf, bisection r (leaves with k down-links and k*r up-links to
k*r spines, `fabric.fattree`) has H NICs, H host cables, H*r switch cables and H + 2*H*r ports; the
3-level tree (leaves not oversubscribed, aggregation switches with p down and p*r up) has H + H*r
switch cables and 3H + 2*H*r ports. A cluster that fits one switch (H <= k) is a star: H ports.
Reducing the bisection removes leaf up-links, their cables and the spine ports they end in.

Ports are priced one by one (`switch_port` is a switch's price spread over its ports). With the
switch radix R known (the plan's radix-true trees, `fabric/switches.py`), whole switches are bought:
num_switches x R ports are priced, used or not, and the switches above the leaves are counted as
ceil(used ports / R) per level (a spine takes several parallel links to one leaf: the simulated XGFT's
k*r spines of one link per leaf carry the same bandwidth); without it only the used ports (a lower bound).
A server with K NICs is K hosts of the tree (`plan/shape.py`).

Try it: `fabriclab plan --model resnet50 --gpus 512 --fabrics 25gbe,100gbe --bisection 1,1/4`.
"""

from __future__ import annotations

from dataclasses import dataclass

from fabriclab.fabric.fattree import FatTreeShape
from fabriclab.plan.prices import FabricPrices


@dataclass(frozen=True, kw_only=True)
class NetworkBill:
    """The parts of one network."""

    num_nics: int
    """Network adapters: one per server."""
    num_switches: int
    """Switches at all levels (informational: ports are what is priced)."""
    num_switch_ports: int
    """Used switch ports."""
    num_host_cables: int
    """Server-to-leaf links."""
    num_switch_cables: int
    """Switch-to-switch links."""
    radix: int | None = None
    """Ports per switch: whole switches are bought (num_switches x radix ports priced); None: used ports."""

    @property
    def num_ports_bought(self) -> int:
        """Switch ports paid for: every port of every switch when the radix is known, else the used ones."""
        if self.radix is None:
            return self.num_switch_ports
        return max(self.num_switch_ports, self.num_switches * self.radix)

    def cost_usd(self, prices: FabricPrices) -> float:
        """NICs + ports + cables at `prices`."""
        return (self.num_nics * prices.nic.usd + self.num_ports_bought * prices.switch_port.usd
                + self.num_host_cables * prices.host_cable.usd
                + self.num_switch_cables * prices.switch_cable.usd)

    def breakdown_usd(self, prices: FabricPrices) -> dict:
        """Cost per kind of part."""
        return {"nics_usd": self.num_nics * prices.nic.usd,
                "switch_ports_usd": self.num_ports_bought * prices.switch_port.usd,
                "host_cables_usd": self.num_host_cables * prices.host_cable.usd,
                "switch_cables_usd": self.num_switch_cables * prices.switch_cable.usd}


def count_network(shape: FatTreeShape, radix: int | None = None) -> NetworkBill:
    """Count the parts of the tree `shape` (see the module doc); with `radix` whole switches are priced and
    the switches above the leaves are as few as their used ports need (parallel links to one switch)."""
    links = [shape.nodes_at(level) * shape.up[level] for level in range(shape.levels)]
    host_links, switch_links = links[0], sum(links[1:])
    switches = sum(shape.nodes_at(level) for level in range(1, shape.levels + 1))
    if radix is not None and shape.levels > 1:
        upper = 0
        for level in range(2, shape.levels + 1):
            ports = links[level - 1] + (links[level] if level < shape.levels else 0)
            upper += -(-ports // radix)
        switches = shape.nodes_at(1) + upper
    return NetworkBill(num_nics=shape.nodes_at(0), num_switches=switches,
                       num_switch_ports=host_links + 2 * switch_links,
                       num_host_cables=host_links, num_switch_cables=switch_links, radix=radix)

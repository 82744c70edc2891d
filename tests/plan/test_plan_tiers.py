"""The switch levels an LLM plan prices follow from the radix of the switches at the NIC's rate: two levels of
R-port switches serve R leaves of R/2 NICs, R^2/2 NICs at full bisection (Quantum-X800, 144 ports of 800G:
10,368), a fat tree whose NICs fit one switch is that switch, and only more NICs need a third level."""

import math

import pytest

from fabriclab.fabric.links import link_preset
from fabriclab.fabric.presets import cluster_preset
from fabriclab.fabric.switches import default_radix
from fabriclab.plan.llm.cluster import vary_cluster
from fabriclab.plan.llm.cost import network_prices, option_cost
from fabriclab.plan.prices import EXTRA_FABRIC_PRICES, load_prices

TABLE = load_prices()
RATES = sorted({link_preset(name).bandwidth_Bps for name in [*TABLE.fabrics, *EXTRA_FABRIC_PRICES]})
H100 = cluster_preset("dgx-h100")  # 8 GPUs and 8 NICs a server, leaves of 32 servers per rail


def expected_levels(fabric: str, servers: int, radix: int) -> int:
    nics, half = 8 * servers, radix // 2
    if fabric == "fat-tree":
        return 1 if nics <= radix else 2 if nics <= radix * half else 3
    return 2 if 8 * math.ceil(servers / half) <= radix else 3  # a rail's leaves hold radix / 2 servers each


@pytest.mark.parametrize("rate", RATES, ids=lambda r: f"{r * 8 / 1e9:g}G")
@pytest.mark.parametrize("fabric", ["rail", "fat-tree"])
def test_the_levels_follow_the_radix_at_every_priced_rate(rate, fabric):
    cluster = vary_cluster(H100, nic_rate_Bps=rate, fabric=fabric)
    prices, _ = network_prices(cluster, TABLE)
    radix = default_radix(prices.fabric)  # every priced fabric has a known switch
    edge = radix * radix // 16  # servers of 8 NICs that fill two levels exactly: R^2/2 NICs
    for servers in (1, radix // 16, edge // 2, edge, edge + 1, 2 * edge, 4 * edge):
        cost = option_cost(cluster, 8 * servers, TABLE)
        assert cost["switch_radix"] == radix
        assert cost["network_levels"] == expected_levels(fabric, servers, radix), (prices.fabric, servers)
        assert cost["num_nics"] == 8 * servers


def test_800g_b200_at_8192_gpus_is_two_levels_of_144_port_switches():
    cost = option_cost(cluster_preset("hgx-b200"), 8192, TABLE)
    # 8 rails of ceil(1,024 / 72) = 15 leaves of 72 down- and 72 up-links, 8,640 links on 60 spines
    assert (cost["network_levels"], cost["switch_radix"]) == (2, 144)
    assert cost["num_switches"] == 120 + 60 and cost["num_switch_cables"] == 8640
    assert cost["network_usd"] < 100e6  # three levels (427 switches, 16,384 switch cables) priced $140.3M
    ndr = option_cost(H100, 8192, TABLE)  # 64-port NDR switches: 2,048 NICs on two levels, so three here
    assert (ndr["network_levels"], ndr["num_switches"]) == (3, 256 + 256 + 128)

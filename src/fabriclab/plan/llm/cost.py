"""What an LLM plan option costs: its GPU servers and its network, priced with sources.

Servers: GPUs / GPUs per server, at the per-GPU server price of the cluster's GPU (`prices.SERVER_PRICE_PER_GPU`:
H100 from a public listing, H200, B200, B300 and NVL72 racks estimates with their basis, A100 its launch
price; an NVLink domain that spans trays is bought whole, an NVL72 rack's spare trays included), unless a
`--prices FILE` gives `gpu_server_per_gpu` (then that price, for every cluster of the plan). Network: the
parts of the cluster's rail-optimised or fat-tree network counted as `fabriclab plan --cluster` counts them
(`plan/cluster.cluster_bill`: NICs, leaves, spines for the bisection, cables, a third level where the switch
radix needs one, whole switches), priced at the price-table fabric whose line rate is the NIC's (the table's
own first, then `prices.EXTRA_FABRIC_PRICES` for 800G and 1.6T), on switches of that fabric's radix
(`fabric/switches.py`: two levels of 144-port XDR switches serve 144 x 72 = 10,368 NICs).

Try it: `python -c "from fabriclab.plan.llm.cost import option_cost; from fabriclab.plan.prices import
load_prices; from fabriclab.fabric.presets import cluster_preset; print(option_cost(cluster_preset('dgx-h100'),
1024, load_prices()))"`.
"""

from __future__ import annotations

from fabriclab.fabric.cluster import ClusterModel, cluster_gpu
from fabriclab.fabric.domains import domain_gpus_used, domain_size
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.switches import default_radix
from fabriclab.plan.cluster import REL_RATE, cluster_bill
from fabriclab.plan.prices import EXTRA_FABRIC_PRICES, SERVER_PRICE_PER_GPU, FabricPrices, Price, PriceTable


def server_price(cluster: ClusterModel, table: PriceTable, *, shipped: bool) -> Price:
    """The price of one GPU's share of a server (module doc); ValueError when none is known."""
    if not shipped and table.gpu_server_per_gpu is not None:
        return table.gpu_server_per_gpu
    gpu = cluster_gpu(cluster).name
    if gpu in SERVER_PRICE_PER_GPU:
        return SERVER_PRICE_PER_GPU[gpu]
    raise ValueError(f"no server price for {gpu} (cluster {cluster.name}): give one with --prices FILE, a price "
                     f"table with \"gpu_server_per_gpu\" (priced GPUs: {', '.join(SERVER_PRICE_PER_GPU)})")


def network_prices(cluster: ClusterModel, table: PriceTable) -> tuple[FabricPrices, str]:
    """The priced fabric at the cluster's NIC line rate and where its prices come from; ValueError naming
    what is priced when none is."""
    rate = cluster.server.nic_bandwidth_Bps
    for name, prices in table.fabrics.items():  # the table's own first
        if abs(link_preset(name).bandwidth_Bps - rate) <= REL_RATE * rate:
            return prices, table.describe()
    for name, prices in EXTRA_FABRIC_PRICES.items():
        if abs(link_preset(name).bandwidth_Bps - rate) <= REL_RATE * rate:
            return prices, f"{prices.nic.source.rsplit(' (', 1)[0]} (plan/prices.py)"
    priced = sorted({**EXTRA_FABRIC_PRICES, **table.fabrics})
    raise ValueError(f"no priced fabric runs at {rate * 8 / 1e9:g} Gb/s (cluster {cluster.name}): add one to a "
                     f"price table (--prices FILE) or choose --nic-rates among the priced ones ({', '.join(priced)})")


def option_cost(cluster: ClusterModel, gpus: int, table: PriceTable, *, shipped: bool = True) -> dict:
    """Servers, network parts and their prices for `gpus` GPUs of `cluster` (module doc), in USD."""
    g = cluster.server.gpus_per_server
    servers = max(1, gpus // g)
    server = server_price(cluster, table, shipped=shipped)
    fabric, where = network_prices(cluster, table)
    try:  # the switches of the priced fabric's generation set the levels (a 144-port XDR switch: two to 10,368)
        radix = default_radix(fabric.fabric)
    except ValueError:
        radix = None  # a fabric of a price table with no known switch: the NIC generation's
    bill, levels = cluster_bill(cluster, servers, radix)
    # NVLink domains that span trays are bought whole (an NVL72 rack), spare trays included (`fabric/domains.py`)
    domain, used = domain_size(cluster.server), domain_gpus_used(cluster, gpus)
    bought = -(-gpus // used) * domain if domain > g else servers * g
    servers_usd = bought * server.usd
    network_usd = bill.cost_usd(fabric)
    return {"servers": servers, "gpus_bought": bought, "domains_bought": bought // domain if domain > g else 0,
            "domain_gpus": domain, "servers_usd": servers_usd, "network_usd": network_usd,
            "cluster_usd": servers_usd + network_usd, "network_share": network_usd / (servers_usd + network_usd),
            **bill.breakdown_usd(fabric), "num_nics": bill.num_nics, "num_switches": bill.num_switches,
            "network_levels": levels, "switch_radix": bill.radix,
            "num_switch_ports": bill.num_switch_ports, "num_switch_cables": bill.num_switch_cables,
            "priced_fabric": fabric.fabric, "network_prices_from": where, "server_price_per_gpu_usd": server.usd,
            "server_price_source": server.source, "network_price_sources": {
                item: getattr(fabric, item).source for item in ("nic", "switch_port", "host_cable", "switch_cable")}}

"""What can be bought: every cluster preset with the price per GPU a plan charges, and the NICs it prices.

`fabriclab cluster list` prints both tables; each price's source is in `plan/prices.py`.

Try it: `python -c "from fabriclab.plan.catalog import nic_rows; print(nic_rows())"`.
"""

from __future__ import annotations

from fabriclab.fabric.cluster import cluster_gpu
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.presets import PRESETS
from fabriclab.plan.llm.cost import server_price
from fabriclab.plan.prices import EXTRA_FABRIC_PRICES, load_prices


def preset_rows() -> list[dict]:
    """One row per cluster preset: what it is built of and what a plan charges per GPU."""
    table, rows = load_prices(), []
    for name, build in PRESETS.items():
        c = build()
        s, gpu = c.server, cluster_gpu(c)
        try:
            price = server_price(c, table, shipped=True)
            usd, kind = price.usd, ("estimate" if price.source.startswith("estimate") else "listing")
        except ValueError:
            usd, kind = None, "-"
        rows.append({"preset": name, "gpu": gpu.name, "gpus_per_server": s.gpus_per_server,
                     "gpus_per_domain": s.gpus_per_domain or s.gpus_per_server,
                     "nics_per_gpu": s.nics_per_server / s.gpus_per_server, "nic_Gbps": s.nic_bandwidth_Bps * 8 / 1e9,
                     "network": c.network.fabric, "nccl": c.library.nccl_version, "usd_per_gpu": usd,
                     "price_kind": kind})
    return rows


def nic_rows() -> list[dict]:
    """The priced fabrics from 400 Gb/s up (the shipped table and its 800G and 1.6T estimates)."""
    priced = {**load_prices().fabrics, **EXTRA_FABRIC_PRICES}
    rows = []
    for name, prices in priced.items():
        rate = link_preset(name).bandwidth_Bps * 8 / 1e9
        if rate >= 400:
            rows.append({"fabric": name, "Gbps": rate, "estimate": prices.nic.source.startswith("estimate"),
                         **{k: getattr(prices, k).usd for k in ("nic", "switch_port", "host_cable", "switch_cable")}})
    return sorted(rows, key=lambda r: (r["Gbps"], r["fabric"]))

"""`fabriclab plan --cluster FILE`: the plan's options on a calibrated cluster model.

With a cluster file (from `fabriclab calibrate nccl-tests ... --out FILE`) the candidate is that cluster:
its servers (`NodeSpec` filled from the file: GPUs per server), its network (rail-optimised or plain fat
tree of `fabric/rail.py`, its bisection) and NCCL's algorithm/protocol per size. Each bucket's all-reduce
costs what `nccl/predict.py` predicts (`whatif.costs.CostModel(kind="cluster")`, the cost `fabriclab whatif
--cluster` uses, so a plan point equals the what-if point). The network is priced with the price-table
fabric(s) given (default: every priced fabric whose line rate is the cluster's NIC rate), parts counted
as `fabric/rail.py` builds them:

* NICs: servers x NICs per server, each with one server-to-leaf cable and one leaf port;
* leaves: rail: NICs per server x ceil(servers / leaf ports); fat tree: ceil(NICs / leaf ports), or one
  switch when the NICs fit one;
* with more than one leaf, each leaf has max(1, round(leaf ports x bisection)) up-links (two ports and one
  switch cable each) to spines of the switch radix (the NIC generation's, `fabric/switches.py`): as few
  spines as those links need; where more leaves than the radix would need a third level, leaves as wide as
  the radix allows (radix / 2 NICs at full bisection) keep two levels while they can (`cluster_bill`);
* whole switches are priced (switches x radix ports). The prediction itself does not see the levels.

Try it: `fabriclab plan --cluster cluster.json --gpus 64,256 --model resnet50`.
"""

from __future__ import annotations

import math
import time

from fabriclab.fabric.cluster import ClusterModel
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.switches import default_radix
from fabriclab.plan.prices import PriceTable
from fabriclab.nccl.band import moved_clusters
from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.iteration import simulate_iteration
from fabriclab.plan.search import NodeSpec, PlanResult, PlanSpec, mark_pareto, recommend
from fabriclab.plan.bill import NetworkBill
from fabriclab.plan.compute import compute_label, price_note

REL_RATE = 1e-6  # a price-table fabric matches the NIC when the line rates agree to this


def cluster_node(cluster: ClusterModel) -> NodeSpec:
    """The plan's server, filled from the cluster file (its own costs come from the cluster model)."""
    return NodeSpec(gpus_per_server=cluster.server.gpus_per_server, nics_per_server=cluster.server.nics_per_server,
                    rails=cluster.network.fabric == "rail")


def matching_fabrics(cluster: ClusterModel, prices: PriceTable, where: str) -> tuple[str, ...]:
    """Priced fabrics whose line rate is the cluster's NIC rate; ValueError when there is none."""
    rate = cluster.server.nic_bandwidth_Bps
    names = tuple(n for n in prices.fabrics if abs(link_preset(n).bandwidth_Bps - rate) <= REL_RATE * rate)
    if not names:
        raise ValueError(f"cluster file {where}: no priced fabric runs at its NIC rate {rate * 8 / 1e9:g} Gb/s: "
                         f"name the fabric to price its network with --fabrics (priced: "
                         f"{', '.join(prices.fabrics)})")
    return names


def cluster_bill(cluster: ClusterModel, servers: int, radix: int | None = None) -> tuple[NetworkBill, int]:
    """The parts of the cluster's network for `servers` servers (module doc) and its levels. Switches have
    `radix` ports (default: the NIC generation's, `fabric/switches.py`, at least leaf_ports x (1 +
    bisection)). The levels follow from the radix: a fat tree whose NICs fit one switch is that switch; two
    levels serve up to radix leaves, each of at most `widest_leaf` NICs (radix^2 / 2 NICs at full
    bisection); leaves of the cluster's leaf_ports that would be more than the radix are widened to that
    before a third level is built (aggregation switches of radix / 2 down and up in pods, then cores, on the
    cluster's leaves). Whole switches are bought."""
    nics_per, net = cluster.server.nics_per_server, cluster.network
    nics = servers * nics_per
    try:
        generation = default_radix(link_name(cluster))
    except ValueError:
        generation = 0
    radix = radix or max(generation, net.leaf_ports + _up_links(net.leaf_ports, net.bisection))
    widest = widest_leaf(radix, net.bisection)
    down = min(net.leaf_ports, widest)  # a leaf is one switch
    if _leaves(cluster, servers, down) > radix >= _leaves(cluster, servers, widest):
        down = widest  # two levels of wider leaves rather than a third level
    leaves, ups = _leaves(cluster, servers, down), _up_links(down, net.bisection)
    if leaves <= 1 or net.fabric != "rail" and nics <= radix:
        return NetworkBill(num_nics=nics, num_switches=1, num_switch_ports=nics, num_host_cables=nics,
                           num_switch_cables=0, radix=radix), 1
    links = leaves * ups
    if leaves <= radix:
        spines = math.ceil(links / radix)
        return NetworkBill(num_nics=nics, num_switches=leaves + spines, num_switch_ports=nics + 2 * links,
                           num_host_cables=nics, num_switch_cables=links, radix=radix), 2
    aggs = math.ceil(links / (radix // 2))
    cores = math.ceil(aggs * (radix // 2) / radix)
    return NetworkBill(num_nics=nics, num_switches=leaves + aggs + cores, num_switch_ports=nics + 4 * links,
                       num_host_cables=nics, num_switch_cables=2 * links, radix=radix), 3


def _up_links(down: int, bisection: float) -> int:
    return max(1, round(down * bisection))


def widest_leaf(radix: int, bisection: float) -> int:
    """The most NICs one leaf of `radix` ports takes with its up-links for `bisection` (radix / 2 at 1)."""
    return max((k for k in range(1, radix) if k + _up_links(k, bisection) <= radix), default=1)


def _leaves(cluster: ClusterModel, servers: int, down: int) -> int:
    """Leaves of `down` NICs each: per rail on a rail-optimised network, else over all the NICs."""
    nics_per = cluster.server.nics_per_server
    if cluster.network.fabric == "rail":
        return nics_per * math.ceil(servers / down)
    return math.ceil(servers * nics_per / down)


def link_name(cluster: ClusterModel) -> str:
    """The link preset at the cluster's NIC rate (NDR for 400 Gb/s InfiniBand-class NICs), for its radix."""
    rate = cluster.server.nic_bandwidth_Bps
    for name in ("EDR", "HDR", "NDR", "XDR", "25GbE", "100GbE", "200GbE"):
        if abs(link_preset(name).bandwidth_Bps - rate) <= REL_RATE * rate:
            return name
    raise ValueError(f"no switch generation known at {rate * 8 / 1e9:g} Gb/s")


def pessimistic_recommendations(rows: list[dict], spec: PlanSpec) -> list[dict]:
    """The recommendations again with every option at the low end of its scaling range (`scaling_low`:
    the cluster's parameters no log determined at their pessimistic end, `nccl/band.py`)."""
    worst = []
    for r in rows:
        ratio = r["scaling_low"] / r["scaling_factor"]  # images/s scale with 1 / iteration, as the factor
        images = r["images_per_s"] * ratio
        worst.append({**r, "scaling_factor": r["scaling_low"], "images_per_s": images,
                      "usd_per_image_per_s": r["usd_per_image_per_s"] / ratio})
    mark_pareto(worst)
    return recommend(worst, spec.target, spec.budget_usd)


def run_cluster_plan(spec: PlanSpec, cluster: ClusterModel, where: str) -> PlanResult:
    """One option per (GPU count, price-table fabric): the cluster as calibrated."""
    t0 = time.perf_counter()
    g = cluster.server.gpus_per_server
    bad = [n for n in spec.gpus if n > g and n % g]
    if bad:
        raise ValueError(f"{bad[0]} GPUs do not fill servers of {g} GPUs of cluster file {where}: give GPU "
                         f"counts that are multiples of {g}")
    fabrics = tuple(dict.fromkeys(link_preset(f).name for f in spec.fabrics))
    note = price_note(spec.profiles, spec.prices)
    server = None if note else spec.prices.gpu_server_per_gpu
    rows, predicted = [], 0
    moved = moved_clusters(cluster)  # undetermined parameters at the pessimistic and the optimistic end
    for gpus in spec.gpus:
        servers = max(1, gpus // g)
        bill, levels = cluster_bill(cluster, servers)
        cost = CostModel(kind="cluster", cluster=cluster, num_workers=gpus)
        ends = [CostModel(kind="cluster", cluster=c, num_workers=gpus) for c in moved]
        one_switch = levels == 1
        for fabric in fabrics:
            prices = spec.prices.fabric(fabric)
            network_usd = bill.cost_usd(prices)
            servers_usd = None if server is None else gpus * server.usd
            total = network_usd + (servers_usd or 0.0)
            for profile in spec.profiles:
                it = simulate_iteration(profile, spec.fusion, cost)
                low, high = (simulate_iteration(profile, spec.fusion, c).scaling_factor for c in ends)
                images = gpus * profile.batch_size / it.iteration_s
                rows.append({
                    "model": profile.model, "fabric": fabric,
                    "topology": "1 switch" if one_switch else f"{cluster.network.fabric} {levels}-level",
                    "levels": levels, "radix": bill.radix,
                    "bisection": "1" if one_switch else f"{cluster.network.bisection:g}", "gpus": gpus,
                    "servers": servers, "algo": "nccl", "placement": "linear", "cluster": cluster.name,
                    "compute": compute_label(profile), "nics_per_server": cluster.server.nics_per_server,
                    "scaling_factor": it.scaling_factor, "images_per_s": images,
                    "scaling_low": min(low, it.scaling_factor), "scaling_high": max(high, it.scaling_factor),
                    "iteration_s": it.iteration_s, "overhead_s": it.overhead_s, "comm_s": it.comm_s,
                    "num_buckets": it.num_buckets, "allreduce_intercept_s": None,
                    "allreduce_s_per_byte": None, "sim_exact": True,
                    "network_usd": network_usd, **bill.breakdown_usd(prices),
                    "num_switches": bill.num_switches, "num_switch_ports": bill.num_switch_ports,
                    "num_host_cables": bill.num_host_cables, "num_switch_cables": bill.num_switch_cables,
                    "servers_usd": servers_usd, "cluster_usd": None if servers_usd is None else total,
                    "network_share": network_usd / total if servers_usd is not None and total > 0 else None,
                    "usd_per_image_per_s": total / images,
                })
        predicted += len(cost._cache)
    mark_pareto(rows)
    recs = recommend(rows, spec.target, spec.budget_usd)
    for rec, worst in zip(recs, pessimistic_recommendations(rows, spec)):
        rec["holds_at_low_end"] = worst["row"] == rec["row"]
        if not rec["holds_at_low_end"]:
            rec["text"] += ("; with the cluster's undetermined parameters at their pessimistic end: "
                            + worst["text"].split(": ", 1)[1])
    stats = {"num_options": len(rows), "num_topologies": len(spec.gpus), "num_simulations": 0,
             "num_predictions": predicted, "wall_s": time.perf_counter() - t0, "price_note": note}
    return PlanResult(rows=rows, recommendations=recs, skipped=[], stats=stats)

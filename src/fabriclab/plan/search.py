"""How much network to buy: every (fabric, tree, bisection, GPU count, algorithm) option for a model,
its scaling factor, throughput and network cost, the Pareto frontier and a recommendation.

Each option is a real topology (`plan/shape.py`: a fat tree of switches of the fabric generation's
radix with the levels that radix forces, 1, 2 or 3, the leaf or aggregation up-links reduced to the
bisection), ranks placed on servers of `gpus_per_server` GPUs and `nics_per_server` NICs, plain or on
rails. Its all-reduce cost comes from the flow simulator on that topology (`plan/affine.py`, two sizes
per simulation-equivalent topology): by default for the algorithm NCCL itself runs at each bucket size
and scale (`plan/library_choice.py`), or for the `--algo` given; the iteration comes from the what-if's
replay (`simulate_iteration` with the fusion policy), so a plan point with a given algorithm equals
`fabriclab whatif --cost simulated` on the same topology. The network's parts, whole switches, are
counted by `plan/bill.py` and priced by `plan/prices.py`; the server price counts only when it is of the
profile's GPU (`plan/compute.py`), and every row says where its compute comes from.

Scaling factor f = t_batch / (t_batch + exposed communication) (Zhang et al., NetAI'20);
images/s = GPUs * batch per GPU / iteration; network share = network / (network + GPU servers);
cost per images/s = (network + servers) / images/s (network alone when the server price is unknown).
An option is on the Pareto frontier of its (model, GPU count) when no other option is as cheap or
cheaper and scales as well or better, one of the two strictly.

The server is described by `NodeSpec`; a calibrated cluster model (a `--cluster FILE`) can fill it
in place of the command-line options, the rest of the plan takes it as data.

Try it: `fabriclab plan --model resnet50 --gpus 64,256,512 --fabrics 25gbe,100gbe --bisection 1,1/4`, or at
today's scale `fabriclab plan --gpus 16384 --gpus-per-server 8 --nics-per-server 8 --fabrics 400g-ndr --bisection 1`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from fabriclab.fabric.links import link_preset
from fabriclab.plan.compute import compute_label, price_note
from fabriclab.plan.library_choice import NCCL, SIMULATED_ALGO, ChoiceCost, grid_cluster, node_tree_cost
from fabriclab.plan.shape import build_network, check_schedule_size, option_placement, option_tree
from fabriclab.plan.prices import PriceTable
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.iteration import simulate_iteration
from fabriclab.plan.bill import count_network
from fabriclab.plan.affine import CollectiveCosts
from fabriclab.workload.profile import Profile

# The element-wise add rate of the shipped V100 table (`workload/data/v100/cuda_vec_add.log`) at its
# largest size, 640 MiB in 2.43 ms: the per-byte reduction cost of large chunks on that GPU.
V100_GAMMA_S_PER_BYTE = 0.00243368 / (640 * 1 << 20)
DEFAULT_TARGET = 0.9  # the scaling factor the question asks about when neither target nor budget is given
MIN_BISECTION, MAX_BISECTION = Fraction(1, 16), Fraction(1)


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """One GPU server: the part of a cluster model the plan needs."""

    gpus_per_server: int = 2
    """GPUs per server (TX-GAIA of Samsi et al.: 2 V100 per node)."""
    nics_per_server: int = 1
    """NICs per server, each shared by gpus_per_server / nics_per_server GPUs (a DGX: 8 GPUs, 8 NICs)."""
    rails: bool = False
    """Rail-optimised: NIC j of every server on rail j's leaves (`plan/shape.py`); else a server's NICs
    share a leaf."""
    pcie: str = "PCIe3x16"
    """Link between each GPU and the server's PCIe switch (V100-era servers: PCIe 3.0 x16)."""
    nvlink: str | None = None
    """Per-GPU NVLink preset for traffic inside a server; None: over PCIe."""
    gamma_s_per_byte: float = V100_GAMMA_S_PER_BYTE
    """Reduction cost per reduced byte on the GPU."""


@dataclass(frozen=True, kw_only=True)
class PlanSpec:
    """The question: which options, for which models, judged how."""

    profiles: tuple[Profile, ...]
    """Workload profiles (built-in V100 models or files from `fabriclab profile`)."""
    gpus: tuple[int, ...]
    """GPU counts."""
    fabrics: tuple[str, ...]
    """Link presets, e.g. 25GbE, OPA100 (100g-opa), 100GbE, HDR (200g-hdr), NDR (400g-ndr)."""
    prices: PriceTable
    """Prices of the fabrics' parts (and optionally of the GPU servers)."""
    levels: tuple[int, ...] = ()
    """Fat-tree levels to consider, 2 and/or 3; empty: the fewest the switch radix allows (1, 2 or 3)."""
    bisections: tuple[Fraction, ...] = (Fraction(1),)
    """Bisection ratios, 1/16 .. 1."""
    algos: tuple[str, ...] = ("nccl",)
    """All-reduce algorithm specs (`fabriclab collectives list`), or `nccl`: NCCL's own choice per bucket
    size (`plan/library_choice.py`)."""
    hosts_per_leaf: int | None = None
    """NICs under one leaf switch (and leaves per pod of a 3-level tree); None: the most the radix allows."""
    radix: int | None = None
    """Ports per switch; None: the fabric generation's (`fabric/switches.py`)."""
    placement: str = "linear"
    """Ranks on GPUs: linear (a server's GPUs get consecutive ranks), round-robin or random."""
    fusion: FusionPolicy = field(default_factory=FusionPolicy)
    """Gradient fusion policy of the what-if (default: Zhang et al.'s 5 ms / 64 MiB)."""
    node: NodeSpec = field(default_factory=NodeSpec)
    """The GPU server."""
    target: float | None = None
    """Scaling factor to reach; None with no budget: DEFAULT_TARGET."""
    budget_usd: float | None = None
    """Most the network may cost (USD), per GPU count."""


@dataclass(frozen=True, kw_only=True)
class PlanResult:
    """Every option's row, the recommendations and what it took."""

    rows: list
    """One dict per (model, option), in option order."""
    recommendations: list
    """One dict per (model, GPU count): `text` and the chosen row's index (None when nothing fits)."""
    skipped: list
    """Options that could not be built, with the reason."""
    stats: dict
    """num_options, num_topologies, num_simulations, wall_s."""


def check_bisection(ratio: Fraction | float) -> Fraction:
    """A bisection ratio of a plan, in 1/16 .. 1 (parsed from text by `units.parse_fraction` at the edge)."""
    if isinstance(ratio, str):
        raise TypeError(f"bisection {ratio!r}: give a number (parse text with fabriclab.units.parse_fraction)")
    value = ratio if isinstance(ratio, Fraction) else Fraction(ratio).limit_denominator(1 << 12)
    if not MIN_BISECTION <= value <= MAX_BISECTION:
        raise ValueError(f"bisection {value} is outside 1 .. 1/16: a fat tree's leaves keep between all and "
                         f"1/16 of their down-link bandwidth as up-links; use e.g. 1, 1/2, 1/4, 1/8, 1/16")
    return value


def _check(spec: PlanSpec) -> None:
    if not spec.profiles or not spec.gpus or not spec.fabrics or not spec.algos:
        raise ValueError("give at least one model, GPU count, fabric and algorithm")
    g, k = spec.node.gpus_per_server, spec.node.nics_per_server
    if not isinstance(g, int) or g < 1:
        raise ValueError(f"gpus per node {g!r}: give a whole number >= 1")
    if not isinstance(k, int) or k < 1 or g % k:
        raise ValueError(f"--nics-per-server {k!r}: give a whole number that divides --gpus-per-server {g} "
                         f"(each NIC serves the same number of GPUs), e.g. 1 or {g}")
    if spec.node.rails and k == 1:
        raise ValueError("--rails needs --nics-per-server > 1: a rail is NIC j of every server (e.g. "
                         "--gpus-per-server 8 --nics-per-server 8 --rails)")
    bad = [n for n in spec.gpus if n < 1 or n % g]
    if bad:
        raise ValueError(f"{bad[0]} GPUs do not fill servers of {g} GPUs: give GPU counts that are "
                         f"multiples of --gpus-per-server {g}")
    for level in spec.levels:
        if level not in (2, 3):
            raise ValueError(f"levels {level}: plan builds fat trees of 2 or 3 levels")
    for ratio in spec.bisections:
        check_bisection(ratio)
    for name in spec.fabrics:
        spec.prices.fabric(name)  # unknown fabric or missing prices: a clear ValueError now
    if spec.target is not None and not 0 < spec.target <= 1:
        raise ValueError(f"target scaling factor {spec.target}: give a value in (0, 1], e.g. 0.9")
    if spec.budget_usd is not None and not spec.budget_usd > 0:
        raise ValueError(f"budget {spec.budget_usd}: give a network budget > 0 in US dollars")
    for algo in spec.algos:
        if algo != NCCL:
            check_schedule_size(algo, max(spec.gpus))


def _options(spec: PlanSpec) -> list[tuple]:
    """(gpus, fabric, levels or None, bisection, tree or None, why not) of every topology to build, one-switch
    duplicates dropped."""
    return [o for gpus in spec.gpus for fabric in (link_preset(f).name for f in spec.fabrics)
            for o in _point_options(spec, gpus, fabric)]


def _point_options(spec: PlanSpec, gpus: int, fabric: str) -> list[tuple]:
    """The options of one (GPU count, fabric) point (duplicates never cross points: a point is part of the
    key). A point computes only its own: all of them cost ~0.1 s on a 500-point plan, once per point."""
    out, seen = [], set()
    for levels in spec.levels or (None,):
        for ratio in spec.bisections:
            try:
                tree = option_tree(spec.node, fabric, gpus, ratio, levels, spec.radix, spec.hosts_per_leaf)
            except ValueError as exc:
                out.append((gpus, fabric, levels, ratio, None, str(exc)))
                continue
            key = () if tree.levels == 1 else (tree.levels, ratio)
            if key not in seen:
                seen.add(key)
                out.append((gpus, fabric, levels, ratio, tree, ""))
    return out


def _algo_cost(costs: CollectiveCosts, spec: PlanSpec, fabric: str, topo, algo: str, gpus: int, placement,
               picks: dict | None = None):
    if algo != NCCL:
        return costs.cost(topo, algo, gpus, placement)
    node = spec.node
    cluster = grid_cluster(gpus_per_server=node.gpus_per_server, nics_per_server=node.nics_per_server,
                           fabric=fabric, pcie=node.pcie, nvlink=node.nvlink)
    per_nic = node.gpus_per_server // node.nics_per_server
    leaders = np.arange(gpus // per_nic, dtype=np.int64) * per_nic  # the first GPU behind each NIC
    intra_Bps = link_preset(node.nvlink or node.pcie).effective_bandwidth(True)

    def simulate(name: str):
        if name != SIMULATED_ALGO["tree"] or per_nic == 1:
            return costs.cost(topo, name, gpus, placement)
        return node_tree_cost(costs.cost(topo, name, len(leaders), leaders), per_nic, intra_Bps)

    # NCCL's pick at a size depends on the point's (GPU count, fabric) only: its trees and bisections share them
    return ChoiceCost(cluster=cluster, num_ranks=gpus, simulate=simulate, _memo={} if picks is None else picks)


def plan_points(spec: PlanSpec) -> list[tuple[int, str]]:
    """The plan's points: (GPU count, fabric) of every option that can be built, each its trees, bisections,
    algorithms and models; no simulation is shared between two points (their topologies differ in ranks or
    links), the options of one point share theirs (`plan/affine.py`)."""
    return _points(_options(spec))


def _points(options: list[tuple]) -> list[tuple[int, str]]:
    return list(dict.fromkeys((gpus, fabric) for gpus, fabric, *_, tree, _ in options if tree))


def run_plan(spec: PlanSpec, run_points=None, progress=None) -> PlanResult:
    """Evaluate every option of `spec` (module doc). `run_points(fn, spec, points)` returns
    `[fn(spec, p) for p in points]`, in order, wherever it runs them (it reports its own progress); without
    it they run here, one after another, with `progress(done, total, what)` after each."""
    _check(spec)
    t0 = time.perf_counter()
    options = _options(spec)
    skipped = [f"{fabric}, {f'{levels}-level' if levels else 'fat tree'}, bisection {ratio}, {gpus} GPUs: {why}"
               for gpus, fabric, levels, ratio, tree, why in options if tree is None]
    points = _points(options)
    parts = (run_points or _here(progress))(plan_point, spec, points)
    rows = [row for part in parts for row in part["rows"]]
    skipped += [why for part in parts for why in part["skipped"]]
    if not rows:
        raise ValueError("no option could be built: " + "; ".join(skipped[:3]))
    mark_pareto(rows)
    recs = recommend(rows, spec.target, spec.budget_usd)
    stats = {"num_options": len(rows), "num_topologies": sum(p["num_topologies"] for p in parts),
             "num_simulations": sum(p["num_simulations"] for p in parts), "wall_s": time.perf_counter() - t0,
             "price_note": price_note(spec.profiles, spec.prices)}
    return PlanResult(rows=rows, recommendations=recs, skipped=skipped, stats=stats)


def _here(progress):
    """`run_points` that runs the points in this process, one after another, calling `progress`."""
    def run_points(fn, context, points):
        out = []
        if progress is not None:
            progress(0, len(points), "starting")
        for i, point in enumerate(points):
            out.append(fn(context, point))
            if progress is not None:
                progress(i + 1, len(points), f"{point[1]}, {point[0]} GPUs")
        return out

    return run_points


def plan_point(spec: PlanSpec, point: tuple[int, str]) -> dict:
    """The rows of one (GPU count, fabric) point: its trees and bisections for every algorithm and model, what
    could not be built, and what it took."""
    gpus, fabric = point
    costs = CollectiveCosts(gamma_s_per_byte=spec.node.gamma_s_per_byte)
    picks: dict = {}  # NCCL's (algorithm, protocol) per bucket size at this point
    rows, skipped, built = [], [], 0
    for _, _, _, ratio, tree, _ in (o for o in _point_options(spec, gpus, fabric) if o[4] is not None):
        try:
            topo = build_network(spec.node, fabric, gpus, tree, ratio)
        except ValueError as exc:
            skipped.append(f"{fabric}, {tree.levels}-level, bisection {ratio}, {gpus} GPUs: {exc}")
            continue
        built += 1
        rows += _option_rows(spec, costs, fabric, gpus, ratio, tree, topo, picks)
    return {"rows": rows, "skipped": skipped, "num_topologies": built, "num_simulations": costs.num_simulations}


def _option_rows(spec: PlanSpec, costs: CollectiveCosts, fabric: str, gpus: int, ratio, tree, topo,
                 picks: dict | None = None) -> list:
    """The rows of one built option: every algorithm and model."""
    rows = []
    server = None if price_note(spec.profiles, spec.prices) else spec.prices.gpu_server_per_gpu
    prices = spec.prices.fabric(fabric)
    bill = count_network(topo.router.shape, radix=tree.radix)
    network_usd = bill.cost_usd(prices)
    servers_usd = None if server is None else gpus * server.usd
    placement = option_placement(gpus, topo, spec.node, spec.placement)
    one_switch = tree.levels == 1
    for algo in spec.algos:
        cost = _algo_cost(costs, spec, fabric, topo, algo, gpus, placement, picks)
        for profile in spec.profiles:
            if isinstance(cost, ChoiceCost):
                cost.reset()
            it = simulate_iteration(profile, spec.fusion, cost)
            images = gpus * profile.batch_size / it.iteration_s
            cluster = network_usd + (servers_usd or 0.0)
            rows.append({
                "model": profile.model, "fabric": fabric,
                "topology": "1 switch" if one_switch else f"{tree.levels}-level fat tree",
                "levels": tree.levels, "radix": tree.radix, "hosts_per_leaf": tree.hosts_per_leaf,
                "leaves_per_pod": tree.leaves_per_pod,
                "bisection": "1" if one_switch else str(ratio), "gpus": gpus,
                "servers": gpus // spec.node.gpus_per_server, "nics_per_server": spec.node.nics_per_server,
                "rails": spec.node.rails, "algo": algo, "placement": spec.placement,
                "library_choice": cost.describe() if isinstance(cost, ChoiceCost) else algo,
                "compute": compute_label(profile),
                "scaling_factor": it.scaling_factor, "images_per_s": images,
                "iteration_s": it.iteration_s, "overhead_s": it.overhead_s,
                "comm_s": it.comm_s, "num_buckets": it.num_buckets,
                "allreduce_intercept_s": cost.intercept_s,
                "allreduce_s_per_byte": cost.slope_s_per_byte, "sim_exact": cost.exact,
                "network_usd": network_usd, **bill.breakdown_usd(prices),
                "num_nics": bill.num_nics, "num_switches": bill.num_switches,
                "num_switch_ports": bill.num_switch_ports, "num_switch_ports_bought": bill.num_ports_bought,
                "num_host_cables": bill.num_host_cables,
                "num_switch_cables": bill.num_switch_cables,
                "servers_usd": servers_usd,
                "cluster_usd": None if servers_usd is None else cluster,
                "network_share": (network_usd / cluster if servers_usd is not None
                                  and cluster > 0 else None),
                "usd_per_image_per_s": cluster / images,
            })
    return rows


def _groups(rows: list) -> dict:
    groups: dict = {}
    for i, row in enumerate(rows):
        groups.setdefault((row["model"], row["gpus"]), []).append(i)
    return groups


def mark_pareto(rows: list) -> None:
    """Set `pareto` on each row: not dominated in (network cost down, scaling factor up) within its
    (model, GPU count)."""
    for members in _groups(rows).values():
        for i in members:
            a = rows[i]
            rows[i]["pareto"] = not any(
                b["network_usd"] <= a["network_usd"] and b["scaling_factor"] >= a["scaling_factor"]
                and (b["network_usd"] < a["network_usd"] or b["scaling_factor"] > a["scaling_factor"])
                for b in (rows[j] for j in members if j != i))


def describe(row: dict) -> str:
    """`100GbE, 2-level fat tree of 64-port switches, bisection 1/4, ring` (NCCL's choice: what it ran)."""
    where = row["topology"] + ("" if row["topology"] == "1 switch" else f", bisection {row['bisection']}")
    if row.get("radix") and row["topology"] != "1 switch":
        where = where.replace("fat tree", f"fat tree of {row['radix']}-port switches", 1)
    nics = row.get("nics_per_server", 1)
    if nics > 1:
        where += f", {nics} NICs per server" + (" on rails" if row.get("rails") else "")
    algo = row["algo"]
    if algo == "nccl":
        algo = "NCCL's choice" + (f" ({row['library_choice']})" if row.get("library_choice") else "")
    return f"{row['fabric']}, {where}, {algo}"


def recommend(rows: list, target: float | None, budget_usd: float | None) -> list:
    """Per (model, GPU count): the cheapest option reaching `target` (within `budget_usd`), or with only
    a budget the best-scaling option within it; ties go to the better-scaling, then cheaper one."""
    if target is None and budget_usd is None:
        target = DEFAULT_TARGET
    out = []
    for (model, gpus), members in _groups(rows).items():
        fits = [i for i in members if budget_usd is None or rows[i]["network_usd"] <= budget_usd]
        if target is not None:
            goal = f"reaches {target:.2f}" + (f" within ${budget_usd:,.0f}" if budget_usd is not None else "")
            ok = [i for i in fits if rows[i]["scaling_factor"] >= target]
            pick = min(ok, key=lambda i: (rows[i]["network_usd"], -rows[i]["scaling_factor"]), default=None)
            lead = f"the cheapest option that {goal}"
        else:
            goal = f"fits ${budget_usd:,.0f}"
            pick = max(fits, key=lambda i: (rows[i]["scaling_factor"], -rows[i]["network_usd"]), default=None)
            lead = f"the best-scaling option that {goal}"
        head = f"{model} at {gpus} GPUs: "
        if pick is None:
            best = max(fits or members, key=lambda i: (rows[i]["scaling_factor"], -rows[i]["network_usd"]))
            text = head + f"no option {goal}; the best is {_summary(rows[best])}"
        else:
            text = head + f"{lead} is {_summary(rows[pick])}"
        out.append({"model": model, "gpus": gpus, "target": target, "budget_usd": budget_usd,
                    "row": pick, "text": text})
    return out


def _summary(row: dict) -> str:
    share = f", {row['network_share']:.1%} of the cluster" if row["network_share"] is not None else ""
    return (f"{describe(row)} (scaling {row['scaling_factor']:.3f}, {row['images_per_s']:,.0f} images/s, "
            f"network ${row['network_usd']:,.0f}{share})")

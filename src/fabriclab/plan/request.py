"""A plan from its parsed options: the `PlanSpec`, the machine it plans (a fabric grid or one cluster),
the run, and the prices the answer used.

`PlanRequest` holds what `fabriclab plan` was asked in plain values (the CLI splits lists and parses
quantities); `plan_spec` checks it and builds the `PlanSpec` (a cluster sets the servers, and by default
the priced fabrics at its NIC rate); `run` plans the fabric grid (`plan/search.py`) or the cluster
(`plan/cluster.py`).

Try it: `fabriclab plan --model resnet50 --gpus 64,256 --cluster dgx-a100`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction

from fabriclab.plan.cluster import cluster_node, matching_fabrics, run_cluster_plan
from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import NodeSpec, PlanResult, PlanSpec, check_bisection, run_plan
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.plan.compute import cluster_profiles, plan_profile

# 16384 GPUs: the flow simulator runs a ring of that many ranks in ~13 s here (`fabriclab bench sim`)
MAX_PLAN_GPUS = 16384
DEFAULT_FABRICS = ("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr")
DEFAULT_GPUS_PER_SERVER = 2  # TX-GAIA of Samsi et al.: 2 V100 per node


@dataclass(frozen=True, kw_only=True)
class PlanRequest:
    """The plan's options, lists split and quantities parsed."""

    models: tuple[str, ...]
    gpus: tuple[int, ...]
    gpus_per_server: int | None = None
    fabrics: tuple[str, ...] | None = None
    levels: tuple[int, ...] = ()
    bisections: tuple[Fraction, ...] = (Fraction(1),)
    algos: tuple[str, ...] = ("nccl",)
    hosts_per_leaf: int | None = None
    radix: int | None = None
    nics_per_server: int | None = None
    rails: bool = False
    placement: str = "linear"
    fusion: str = "time-or-size"
    target: float | None = None
    budget_usd: float | None = None
    prices_path: str | None = None
    iteration_s: float | None = None
    cluster: object = None
    """A `fabric.cluster.ClusterModel` to plan instead of the fabric grid."""
    cluster_name: str = ""
    """How the user named the cluster (file or preset), for messages."""


def plan_spec(request: PlanRequest) -> PlanSpec:
    """The `PlanSpec`; bad values raise ValueError saying what to change."""
    if request.gpus and request.gpus[-1] > MAX_PLAN_GPUS:
        raise ValueError(f"GPU counts {request.gpus[-1]}: at most {MAX_PLAN_GPUS}")
    policy = FusionPolicy(name=request.fusion)
    policy.buckets([1], [0.0])  # an unknown policy name fails here, before the work
    prices = load_prices(request.prices_path)
    node = NodeSpec(gpus_per_server=request.gpus_per_server or DEFAULT_GPUS_PER_SERVER,
                    nics_per_server=request.nics_per_server or 1, rails=request.rails)
    fabrics = request.fabrics
    profiles = tuple(plan_profile(m, iteration_s=request.iteration_s) for m in request.models)
    if request.cluster is not None:
        given = [f for f, v in (("--gpus-per-server", request.gpus_per_server),
                                ("--nics-per-server", request.nics_per_server), ("--radix", request.radix)) if v]
        if given or request.rails:
            raise ValueError(f"{(given or ['--rails'])[0]} does not apply with --cluster: {request.cluster_name} "
                             f"sets the servers and network (swap its NIC with --nic)")
        node = cluster_node(request.cluster)
        profiles = cluster_profiles(profiles, request.cluster)
        fabrics = fabrics or matching_fabrics(request.cluster, prices, request.cluster_name)
    return PlanSpec(
        profiles=profiles,
        gpus=request.gpus, fabrics=tuple(dict.fromkeys(fabrics or DEFAULT_FABRICS)),
        levels=tuple(dict.fromkeys(request.levels)),
        bisections=tuple(dict.fromkeys(check_bisection(b) for b in request.bisections)),
        algos=tuple(dict.fromkeys(request.algos)), hosts_per_leaf=request.hosts_per_leaf, radix=request.radix,
        placement=request.placement, fusion=policy, node=node, target=request.target,
        budget_usd=request.budget_usd, prices=prices)


def run(spec: PlanSpec, request: PlanRequest, run_points=None, progress=None) -> PlanResult:
    """Plan the cluster when there is one (its servers, network and library model), else the grid, its
    points run by `run_points` (`search.run_plan`); `progress(done, total, what)` after each point of the grid
    (when they run here)."""
    if request.cluster is not None:
        return run_cluster_plan(spec, request.cluster, request.cluster_name)
    return run_plan(spec, run_points=run_points, progress=progress)


def prices_used(spec: PlanSpec) -> dict:
    """The prices of the compared fabrics, with their sources and dates, for the record."""
    from fabriclab.fabric.links import link_preset

    table = spec.prices
    used = {name: asdict(table.fabric(name)) for name in dict.fromkeys(link_preset(f).name for f in spec.fabrics)}
    server = None if table.gpu_server_per_gpu is None else asdict(table.gpu_server_per_gpu)
    return {"label": table.label, "source": table.source, "note": table.note, "fabrics": used,
            "gpu_server_per_gpu": server}

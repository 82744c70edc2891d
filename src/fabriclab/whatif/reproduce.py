"""The what-if of Zhang et al., "Is Network the Bottleneck of Distributed Training?" (NetAI'20), reproduced
from the V100 logs shipped with fabriclab (the paper's repository).

`reproduce()` computes every number of the report: the full sweep (3 models x 5 bandwidths x 3 worker
counts x 6 compression ratios, the paper's fusion and cost), the compression ratio each model needs at
10 Gbps for a scaling factor of 0.9 and 0.99, the numbers the paper's conclusions rest on, and how other
fusion policies and algorithms change the answer at 64 workers. `report.whatif` writes it as Markdown,
CSV and plots.

Try it: `fabriclab whatif reproduce --out results/whatif`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.iteration import simulate_iteration
from fabriclab.whatif.sweep import PAPER_COMPRESSION, PAPER_WORKERS, SweepAxes, compression_needed, run_sweep
from fabriclab.workload.addcost import builtin_add_cost
from fabriclab.workload.profile import V100_BATCH_S, load_profile

# Zhang et al., NetAI'20 (Figure 1, via ../shared/reference/README.md): Horovod over TCP at 100 Gbps,
# 8 GPUs per server, 2 / 4 / 8 servers = 16 / 32 / 64 GPUs.
MEASURED_HOROVOD_100G = {"resnet50": (0.7505, 0.7424, 0.716), "resnet101": (0.6892, 0.6628, 0.6699),
                         "vgg16": (0.5599, 0.6301, 0.598)}
TARGETS = (0.9, 0.99)
"""Scaling factors the paper asks the compression ratio for."""
COMPRESSION_GBPS = 10
"""Bandwidth of the compression question."""
POLICY_WORKERS = 64
POLICY_BANDWIDTHS_GBPS = (10, 25, 100)
POLICY_FUSIONS = ("time-or-size", "horovod", "ddp", "none")
POLICY_ALGOS = ("ring", "butterfly")
POLICY_ALPHA_S = 25e-6
"""Per-message latency of the closed-form algorithms in the policy table (TCP-like)."""
POLICY_COLUMNS = (*POLICY_FUSIONS, *POLICY_ALGOS)
"""The cells of one row of the policy table, in order."""


@dataclass(frozen=True, kw_only=True)
class Reproduction:
    """Every number of the reproduced what-if."""

    models: tuple[str, ...]
    """The profiles' models, in the order of `V100_BATCH_S`."""
    rows: list[dict]
    """The full sweep, one row per point (`whatif.sweep.run_sweep`)."""
    sweep_s: float
    """Wall time of the full sweep, seconds."""
    scaling: dict[tuple, float]
    """Scaling factor per (model, Gbps, workers, compression) of the sweep."""
    compression: dict[tuple[str, int], list[float | None]]
    """Compression ratio needed at `COMPRESSION_GBPS` per (model, workers), one per `TARGETS` (None: > 1000x)."""
    policies: dict[tuple[str, int], list[float]]
    """Scaling factor per (model, Gbps) at `POLICY_WORKERS` workers, one per `POLICY_COLUMNS`."""

    def lowest_at_100(self) -> float:
        """Lowest scaling factor at 100 Gbps without compression (the paper: close to 100 %)."""
        return min(self.scaling[(m, 100, n, 1)] for m in self.models for n in PAPER_WORKERS)

    def resnets_need(self) -> float:
        """Most compression the ResNets need for the first target at `COMPRESSION_GBPS`."""
        return max(x for (m, n), v in self.compression.items() if m != "vgg16" for x in v[:1])

    def vgg16_needs(self) -> float:
        """Most compression VGG16 needs for the first target at `COMPRESSION_GBPS`."""
        return max(self.compression[("vgg16", n)][0] for n in PAPER_WORKERS)

    def gain_at_100(self) -> float:
        """Most that 10x compression adds to the scaling factor at 100 Gbps."""
        return max(self.scaling[(m, 100, n, 10)] - self.scaling[(m, 100, n, 1)]
                   for m in self.models for n in PAPER_WORKERS)

    def worst_loss(self, column: int, bandwidth_Gbps: int) -> tuple[str, float]:
        """(model, loss) where the policy table's `column` loses most against time-or-size at a bandwidth."""
        table = self.policies
        m = max(self.models, key=lambda k: table[(k, bandwidth_Gbps)][0] - table[(k, bandwidth_Gbps)][column])
        return m, table[(m, bandwidth_Gbps)][0] - table[(m, bandwidth_Gbps)][column]


def reproduce() -> Reproduction:
    """The sweep, the compression answer and the policy table from the V100 logs."""
    add = builtin_add_cost()
    profiles = {m: load_profile(m) for m in V100_BATCH_S}
    paper = FusionPolicy()

    def cost(**kw):
        kw.pop("algo", None)
        return CostModel(add_cost=add, **kw)
    t0 = time.perf_counter()
    rows = list(run_sweep(SweepAxes(profiles=tuple(profiles.values()), compression=PAPER_COMPRESSION),
                          paper, cost))
    sweep_s = time.perf_counter() - t0
    scaling = {(r["model"], r["bandwidth_Gbps"], r["workers"], r["compression"]): r["scaling_factor"] for r in rows}
    need = {}
    for m, p in profiles.items():
        for n in PAPER_WORKERS:
            base = CostModel(bandwidth_Bps=COMPRESSION_GBPS * 1e9 / 8, num_workers=n, add_cost=add)
            need[(m, n)] = [compression_needed(p, paper, base, t) for t in TARGETS]
    return Reproduction(models=tuple(profiles), rows=rows, sweep_s=sweep_s, scaling=scaling, compression=need,
                        policies=_policies(profiles, paper, add))


def _policies(profiles: dict, paper: FusionPolicy, add) -> dict[tuple[str, int], list[float]]:
    table = {}
    for m, p in profiles.items():
        for bw in POLICY_BANDWIDTHS_GBPS:
            base = dict(bandwidth_Bps=bw * 1e9 / 8, num_workers=POLICY_WORKERS, add_cost=add)
            cells = [_scaling(p, FusionPolicy(name=name), CostModel(**base)) for name in POLICY_FUSIONS]
            cells += [_scaling(p, paper, CostModel(kind="closed-form", algo=a, alpha_s=POLICY_ALPHA_S, **base))
                      for a in POLICY_ALGOS]
            table[(m, bw)] = cells
    return table


def _scaling(profile, fusion: FusionPolicy, model: CostModel) -> float:
    return simulate_iteration(profile, fusion, model).scaling_factor

"""How fast `fabriclab plan` explores: 5 fabrics x 5 bisections x 5 GPU counts x 3 models.

The grid is the plan question's: the five fabrics of the question (25GbE, Omni-Path 100, 100GbE, HDR, NDR),
bisections 1 .. 1/16, 64 .. 1024 GPUs on servers of 2, the three built-in V100 models, ring all-reduce
on 2-level fat trees, default (illustrative) prices. Then the same fabrics, bisections and models as the
plan is asked today (16 .. 4,096 GPUs, radix-true trees) with its default, NCCL's choice per bucket, and
with `--algo ring`, its peer in the same run (the ratio is printed: timings on a loaded machine move
together). The budget is under 10 s each on the project's 2-core machine. The time covers building every topology, the simulator runs, the iteration
replays, pricing, the Pareto frontier and the recommendations (not the start of Python).

Try it: `python -m fabriclab.bench.speed.plan` (the CLI registers it as `fabriclab bench plan`).
"""

from __future__ import annotations

import time
from fractions import Fraction

from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import PlanSpec, run_plan
from fabriclab.workload.profile import V100_BATCH_S, load_profile

FABRICS = ("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr")
BISECTIONS = tuple(Fraction(1, d) for d in (1, 2, 4, 8, 16))
GPUS = (64, 128, 256, 512, 1024)
TARGET_S = 10.0  # fabriclab's bound for this grid on the project's 2-core machine


# The plan question as users ask it: radix-true trees (the levels each fabric's radix forces), 16 to
# 4,096 GPUs, by default NCCL's own choice per bucket; timed against `--algo ring` in the same run (the peer:
# one simulated algorithm per topology, what the plan cost before NCCL's choice became its default).
WIDE_GPUS = (16, 64, 256, 1024, 4096)


def _timed(spec: PlanSpec) -> dict:
    t0, c0 = time.perf_counter(), time.process_time()
    result = run_plan(spec)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"points": len(result.rows), "wall_s": wall, "cpu_s": cpu, "points_per_s": len(result.rows) / wall,
            "num_topologies": result.stats["num_topologies"], "num_simulations": result.stats["num_simulations"]}


def run(*, gpus: tuple[int, ...] = GPUS, fabrics: tuple[str, ...] = FABRICS,
        bisections: tuple[Fraction, ...] = BISECTIONS, models: tuple[str, ...] = tuple(V100_BATCH_S),
        wide_gpus: tuple[int, ...] = WIDE_GPUS) -> dict:
    """Time one plan over the grid, and the wide grid (16-4,096 GPUs) with NCCL's choice and with ring (`rows`); returns
    points, seconds, points per second and the plan's stats of the first, every grid's in `rows`."""
    profiles = tuple(load_profile(m) for m in models)
    grid = (f"{len(fabrics)} fabrics x {len(bisections)} bisections x {len(gpus)} GPU counts x "
            f"{len(models)} models")
    # the grid as first benchmarked: ring on 2-level trees of 16 servers per leaf
    first = _timed(PlanSpec(profiles=profiles, gpus=gpus, fabrics=fabrics, bisections=bisections,
                            prices=load_prices(), algos=("ring",), levels=(2,), hosts_per_leaf=16))
    rows = [{"grid": f"ring, 2-level, {gpus[0]}-{gpus[-1]} GPUs", "algo": "ring", **first,
             "budget_s": TARGET_S, "within_budget": first["wall_s"] < TARGET_S, "vs_peer": None}]
    wide = {algo: _timed(PlanSpec(profiles=profiles, gpus=wide_gpus, fabrics=fabrics, bisections=bisections,
                                   prices=load_prices(), algos=(algo,))) for algo in ("ring", "nccl")}
    for algo, r in wide.items():
        rows.append({"grid": f"{algo}, {wide_gpus[0]}-{wide_gpus[-1]} GPUs", "algo": algo,
                     **r, "budget_s": TARGET_S, "within_budget": r["wall_s"] < TARGET_S,
                     "vs_peer": r["wall_s"] / wide["ring"]["wall_s"],
                     "cpu_vs_peer": r["cpu_s"] / wide["ring"]["cpu_s"]})
    return {"points": first["points"], "wall_s": first["wall_s"], "points_per_s": first["points_per_s"],
            "target_s": TARGET_S, "within_target": first["wall_s"] < TARGET_S,
            "num_topologies": first["num_topologies"], "num_simulations": first["num_simulations"], "grid": grid,
            "rows": rows}


def report(r: dict) -> str:
    """The benchmark's lines for people."""
    lines = []
    for row in r["rows"]:
        verdict = "within" if row["within_budget"] else "OVER"
        peer = "" if row["vs_peer"] is None else f", {row['vs_peer']:.2f} x ring"
        lines.append(f"plan speed: {r['grid']}, {row['grid']}: {row['points']} points in {row['wall_s']:.2f} s "
                     f"(budget < {row['budget_s']:g} s: {verdict}{peer}); {row['num_topologies']} topologies, "
                     f"{row['num_simulations']} simulator runs")
    return "\n".join(lines)


def main() -> dict:
    """Run and print; returns the result for a record."""
    r = run()
    print(report(r))
    return r


if __name__ == "__main__":
    main()

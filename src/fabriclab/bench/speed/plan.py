"""How fast `fabriclab plan` explores: 5 fabrics x 5 bisections x 5 GPU counts x 3 models.

The grid is the plan question's: the five fabrics of the question (25GbE, Omni-Path 100, 100GbE, HDR, NDR),
bisections 1 .. 1/16, 64 .. 1024 GPUs on servers of 2, the three built-in V100 models, ring all-reduce
on 2-level fat trees, default (illustrative) prices. The target is under 10 s on the
project's 2-core machine. The time covers building every topology, the simulator runs, the iteration
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


def run(*, gpus: tuple[int, ...] = GPUS, fabrics: tuple[str, ...] = FABRICS,
        bisections: tuple[Fraction, ...] = BISECTIONS, models: tuple[str, ...] = tuple(V100_BATCH_S)) -> dict:
    """Time one plan over the grid; returns points, seconds, points per second and the plan's stats."""
    t0 = time.perf_counter()
    # the grid as first benchmarked: ring on 2-level trees of 16 servers per leaf (the plan's default is now
    # NCCL's choice on radix-true trees, whose tree simulations cost more; `fabriclab plan` prints its progress)
    spec = PlanSpec(profiles=tuple(load_profile(m) for m in models), gpus=gpus, fabrics=fabrics,
                    bisections=bisections, prices=load_prices(), algos=("ring",), levels=(2,), hosts_per_leaf=16)
    result = run_plan(spec)
    wall = time.perf_counter() - t0
    points = len(result.rows)
    return {"points": points, "wall_s": wall, "points_per_s": points / wall, "target_s": TARGET_S,
            "within_target": wall < TARGET_S, "num_topologies": result.stats["num_topologies"],
            "num_simulations": result.stats["num_simulations"],
            "grid": f"{len(fabrics)} fabrics x {len(bisections)} bisections x {len(gpus)} GPU counts x "
                    f"{len(models)} models"}


def report(r: dict) -> str:
    """The benchmark's lines for people."""
    verdict = "within" if r["within_target"] else "OVER"
    return (f"plan speed: {r['grid']} = {r['points']} points in {r['wall_s']:.2f} s "
            f"({r['points_per_s']:.0f} points/s; target < {r['target_s']:g} s: {verdict})\n"
            f"  {r['num_topologies']} topologies, {r['num_simulations']} simulator runs")


def main() -> dict:
    """Run and print; returns the result for a record."""
    r = run()
    print(report(r))
    return r


if __name__ == "__main__":
    main()

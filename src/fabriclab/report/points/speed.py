"""How much a Dask cluster costs per point: one plan run in this process, on a local pool of 2 processes and
on a loopback Dask cluster of 2 single-thread workers, points per second each, the ratios, and the check
that all three answers are the same bytes.

The plan: resnet50 on 2 .. 200 GPUs (every even count) x the 5 fabrics of the plan question x bisections 1,
1/2, 1/4: 500 (GPU count, fabric) points, many cheap (one switch, or a count a fat tree cannot fill), a few
fat trees: what the runner's overhead per point shows on. Timed: the run of the points and the plan's own
work, after a warm-up plan of 10 points on each (the start of the pool and of the cluster is not timed; the
cluster's start is reported apart). On this project's 2-core machine
shared with other jobs, the figures are noisy: the three runs sit side by side in one command, compare
their ratio.

Try it: `fabriclab bench cluster` (or `python -m fabriclab.report.points.speed`).
"""

from __future__ import annotations

import json
import tempfile
import time
from fractions import Fraction
from pathlib import Path

from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import PlanSpec, plan_points, run_plan
from fabriclab.report.points.runner import PointRunner
from fabriclab.workload.profile import load_profile

GPUS = tuple(range(2, 202, 2))
FABRICS = ("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr")
BISECTIONS = (Fraction(1), Fraction(1, 2), Fraction(1, 4))
NUM_WORKERS = 2


def bench_spec(gpus: tuple[int, ...] = GPUS) -> PlanSpec:
    """The benchmark's plan (module doc)."""
    return PlanSpec(profiles=(load_profile("resnet50"),), gpus=gpus, fabrics=FABRICS, bisections=BISECTIONS,
                    prices=load_prices())


def _timed(spec: PlanSpec, where: str, runner: PointRunner | None) -> dict:
    t0 = time.perf_counter()
    result = run_plan(spec, run_points=runner)
    wall = time.perf_counter() - t0
    points = len(plan_points(spec))
    return {"where": where, "points": points, "wall_s": wall, "points_per_s": points / wall,
            "answer": json.dumps([result.rows, result.recommendations, result.skipped])}


def run(gpus: tuple[int, ...] = GPUS, workers: int = NUM_WORKERS) -> dict:
    """Time the plan in this process, on `workers` local processes and on `workers` Dask workers."""
    from fabriclab.report.points.loopback import LoopbackCluster

    spec = bench_spec(gpus)
    rows = [_timed(spec, "this process", None)]
    with tempfile.TemporaryDirectory(prefix="fabriclab-bench-cluster-") as tmp:
        store = Path(tmp) / "points.db"
        with PointRunner(workers=workers, store=store, show_progress=False) as pool:
            run_plan(bench_spec((2, 4)), run_points=pool)  # warm-up: processes started, fabriclab imported
            rows.append(_timed(spec, f"local pool, {workers} processes", pool))
        t1 = time.perf_counter()
        with LoopbackCluster(workers, log_dir=Path(tmp)) as cluster:
            t2 = time.perf_counter()
            with PointRunner(scheduler=cluster.address, store=store, show_progress=False) as dask:
                run_plan(bench_spec((2, 4)), run_points=dask)  # warm-up, as the pool's
                rows.append(_timed(spec, f"dask, {workers} workers (loopback)", dask))
    answers = {r.pop("answer") for r in rows}
    here, pool_row, dask_row = rows
    return {"rows": rows, "same_answer": len(answers) == 1, "workers": workers,
            "dask_vs_pool": dask_row["points_per_s"] / pool_row["points_per_s"],
            "dask_vs_here": dask_row["points_per_s"] / here["points_per_s"],
            "overhead_s_per_point": (dask_row["wall_s"] - pool_row["wall_s"]) / dask_row["points"],
            "cluster_start_s": t2 - t1,
            "plan": f"resnet50, {len(gpus)} GPU counts x {len(FABRICS)} fabrics (bisections 1, 1/2, 1/4)"}


def report(r: dict) -> str:
    """The benchmark's lines for people."""
    lines = [f"plan points on this machine vs a Dask cluster: {r['plan']}"]
    for row in r["rows"]:
        lines.append(f"  {row['where']:<32} {row['points']:>5} points {row['wall_s']:>7.2f} s "
                     f"{row['points_per_s']:>8.1f} points/s")
    lines.append(f"  dask / local pool: {r['dask_vs_pool']:.2f}x the points per second; dask / this process: "
                 f"{r['dask_vs_here']:.2f}x; overhead vs the pool {r['overhead_s_per_point'] * 1e3:+.1f} ms per point")
    lines.append(f"  the cluster took {r['cluster_start_s']:.1f} s to start (not timed above); same answer on all "
                 f"three: {'yes' if r['same_answer'] else 'NO'}")
    return "\n".join(lines)


def main() -> dict:
    """Run and print; returns the result for a record."""
    r = run()
    print(report(r))
    return r


if __name__ == "__main__":
    main()

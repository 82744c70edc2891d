"""A real Dask cluster on loopback: `dask scheduler` and two `dask worker` processes, a plan of 300 points
through them, one worker killed in the middle; the answer must equal the local run's, byte for byte, with
every point stored once (report/points). Needs the `distributed` package (the `test` and `cluster` extras)."""

import json
import sqlite3
import time
from fractions import Fraction

import pytest

from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import PlanSpec, plan_points, run_plan
from fabriclab.report.points.loopback import LoopbackCluster
from fabriclab.report.points.runner import PointRunner
from fabriclab.workload.profile import load_profile

distributed = pytest.importorskip("distributed", reason="the Dask cluster test needs pip install 'fabriclab[cluster]'")


def plan_spec() -> PlanSpec:
    """300 points: 60 GPU counts x the 5 fabrics (most one switch, some fat trees, the rest skipped)."""
    return PlanSpec(profiles=(load_profile("resnet50"),), gpus=tuple(range(2, 122, 2)),
                    fabrics=("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr"),
                    bisections=(Fraction(1), Fraction(1, 2), Fraction(1, 4)), prices=load_prices())


@pytest.fixture
def cluster(tmp_path):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1 (free ports), killed at the end."""
    with LoopbackCluster(2, log_dir=tmp_path) as c:
        yield c


def test_a_plan_on_a_dask_cluster_survives_a_dead_worker_and_equals_the_local_run(cluster, tmp_path):
    address, workers = cluster.address, cluster.workers
    local = run_plan(plan_spec())
    store, killed = tmp_path / "cluster.db", {}

    def kill_one(done: int, total: int) -> None:
        """A third of the way: kill the worker that holds the most unfinished tasks."""
        if killed or done < total // 3:
            return
        with distributed.Client(address, timeout=30, set_as_default=False) as client:
            busy = client.processing()
        victim = max(workers, key=lambda a: len(busy.get(a, ())))
        killed.update(address=victim, holding=len(busy.get(victim, ())), at=done)
        cluster.kill(victim)

    t0 = time.monotonic()
    with PointRunner(scheduler=address, store=store, show_progress=False, on_progress=kill_one) as runner:
        assert runner.pool.slots == 2
        remote = run_plan(plan_spec(), run_points=runner)
    total = len(plan_points(plan_spec()))
    assert killed and killed["holding"] >= 1, f"the worker was killed with no task in hand: {killed}"
    assert killed["at"] < total  # in the middle, not after the end
    stats = runner.stats[-1]
    assert (stats.total, stats.computed, stats.resumed, stats.stored) == (total, total, 0, total)
    with sqlite3.connect(store) as conn:  # every point stored once, none twice, none lost
        keys = [k for (k,) in conn.execute("SELECT point_key FROM points")]
    assert sorted(keys) == sorted(repr(p) for p in plan_points(plan_spec()))
    dump = lambda r: json.dumps([r.rows, r.recommendations, r.skipped])  # noqa: E731
    assert dump(remote) == dump(local)
    assert remote.stats["num_simulations"] == local.stats["num_simulations"]
    assert time.monotonic() - t0 < 120

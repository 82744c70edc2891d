"""A real Dask cluster on loopback: `dask scheduler` and two `dask worker` processes, a plan of 81 points
through them, one worker killed in the middle; the answer must equal the local run's, byte for byte, with
every point stored once (report/points). Needs the `distributed` package (the `test` and `cluster` extras)."""

import functools
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
    """81 points of 17 GPU counts x the 5 fabrics (most one switch, a fat tree at 66 GPUs, the rest skipped).

    About 17 tasks for the 2 workers, as many as the 135 points of 2 to 118 GPUs made, in a third of their
    time: the counts above 60 GPUs, which only add fat trees and skipped options, are left out but two."""
    return PlanSpec(profiles=(load_profile("resnet50"),), gpus=(*range(2, 62, 4), 66, 106),
                    fabrics=("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr"),
                    bisections=(Fraction(1), Fraction(1, 2), Fraction(1, 4)), prices=load_prices())


@functools.cache
def local_answer() -> tuple[str, int]:
    """The plan run here, without a runner: its answer as JSON text, and its simulator runs."""
    result = run_plan(plan_spec())
    return dump(result), result.stats["num_simulations"]


def dump(result) -> str:
    return json.dumps([result.rows, result.recommendations, result.skipped])


def stored_keys(store) -> list[str]:
    with sqlite3.connect(store) as conn:
        return [k for (k,) in conn.execute("SELECT point_key FROM points")]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """`dask scheduler` and two `dask worker` processes on 127.0.0.1 (free ports), killed at the end; the
    tests below share it in file order (the last one kills a worker)."""
    with LoopbackCluster(2, log_dir=tmp_path_factory.mktemp("dask")) as c:
        yield c


def test_a_plan_interrupted_on_dask_resumes_from_the_store(cluster, tmp_path):
    store, total = tmp_path / "resume.db", len(plan_points(plan_spec()))

    def interrupt(done: int, total: int) -> None:
        if done >= total // 2:
            raise KeyboardInterrupt  # what Ctrl-C raises in the client

    with pytest.raises(KeyboardInterrupt):
        with PointRunner(scheduler=cluster.address, store=store, show_progress=False, on_progress=interrupt) as runner:
            run_plan(plan_spec(), run_points=runner)
    kept = len(stored_keys(store))
    assert total // 2 <= kept < total
    with PointRunner(scheduler=cluster.address, store=store, resume=True, show_progress=False) as runner:
        resumed = run_plan(plan_spec(), run_points=runner)
    assert (runner.stats[-1].resumed, runner.stats[-1].computed) == (kept, total - kept)
    assert sorted(stored_keys(store)) == sorted(repr(p) for p in plan_points(plan_spec()))
    assert dump(resumed) == local_answer()[0]


def test_a_plan_on_a_dask_cluster_survives_a_dead_worker_and_equals_the_local_run(cluster, tmp_path):
    address, workers = cluster.address, cluster.workers
    local, num_simulations = local_answer()
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
    # every point stored once, none twice, none lost
    assert sorted(stored_keys(store)) == sorted(repr(p) for p in plan_points(plan_spec()))
    assert dump(remote) == local
    assert remote.stats["num_simulations"] == num_simulations
    assert time.monotonic() - t0 < 120

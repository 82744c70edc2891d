"""A real Dask cluster on loopback: `dask scheduler` and two `dask worker` processes, a plan of 300 points
through them, one worker killed in the middle; the answer must equal the local run's, byte for byte, with
every point stored once (report/points). Needs the `distributed` package (the `test` and `cluster` extras)."""

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

import fabriclab
from fabriclab.plan.prices import load_prices
from fabriclab.plan.search import PlanSpec, plan_points, run_plan
from fabriclab.report.points.runner import PointRunner
from fabriclab.workload.profile import load_profile

distributed = pytest.importorskip("distributed", reason="the Dask cluster test needs pip install 'fabriclab[cluster]'")

START_TIMEOUT_S = 60.0
SRC = Path(fabriclab.__file__).resolve().parent.parent


def plan_spec() -> PlanSpec:
    """300 points: 60 GPU counts x the 5 fabrics (most one switch, some fat trees, the rest skipped)."""
    return PlanSpec(profiles=(load_profile("resnet50"),), gpus=tuple(range(2, 122, 2)),
                    fabrics=("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr"),
                    bisections=(Fraction(1), Fraction(1, 2), Fraction(1, 4)), prices=load_prices())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(argv: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "dask", *argv], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def wait_for_workers(address: str, count: int, procs: list) -> dict:
    """Worker address -> its process, once `count` workers are up (each wait bounded)."""
    client = distributed.Client(address, timeout=START_TIMEOUT_S, set_as_default=False)
    try:
        client.wait_for_workers(count, timeout=START_TIMEOUT_S)
        pids = client.run(os.getpid)
    finally:
        client.close(timeout=10)
    by_pid = {p.pid: p for p in procs}
    return {addr: by_pid[pid] for addr, pid in pids.items()}


@pytest.fixture
def cluster(tmp_path):
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [start(["scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"], tmp_path / "s.log")]
    try:
        for k in range(2):  # no nanny: killing the worker's process is the worker's death, nothing restarts it
            procs.append(start(["worker", address, "--nthreads", "1", "--no-nanny", "--no-dashboard", "--host",
                                "127.0.0.1", "--death-timeout", "60"], tmp_path / f"w{k}.log"))
        yield address, wait_for_workers(address, 2, procs[1:])
    finally:
        for proc in reversed(procs):
            stop(proc)


def test_a_plan_on_a_dask_cluster_survives_a_dead_worker_and_equals_the_local_run(cluster, tmp_path):
    address, workers = cluster
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
        workers[victim].send_signal(signal.SIGKILL)
        workers[victim].wait(timeout=10)

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

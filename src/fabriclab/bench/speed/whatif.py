"""How long the full what-if sweep of Zhang et al. (NetAI'20) takes: our event-driven replay against a real-time replay.

The paper's scripts replay each point in real time, slowed down 10x, with a backward process and an
all-reduce process that spin-wait (`sim_with_compression_comm.py`). `realtime_replay` does the same for
one point (two threads spin-waiting on the same bucket schedule), so its cost is measured here rather
than quoted; the full sweep's replay time is that per-point figure summed over the grid's points
(each point's replay time is its simulated backward + overhead times the slowdown).

Try it: `fabriclab bench whatif`.
"""

from __future__ import annotations

import threading
import time

from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.sweep import PAPER_COMPRESSION, SweepAxes, run_sweep
from fabriclab.workload.addcost import builtin_add_cost
from fabriclab.workload.profile import V100_BATCH_S, load_profile

SLOWDOWN = 10  # the paper's scripts' slowdown_f


def _spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def realtime_replay(profile, fusion: FusionPolicy, cost: CostModel, slowdown: float = SLOWDOWN) -> float:
    """Replay one point in real time, as the paper's scripts do; returns the measured t_sync (un-slowed)."""
    buckets = fusion.buckets([g.size_bytes for g in profile.grads], [g.ready_s for g in profile.grads])
    handed: list[int] = []
    lock = threading.Condition()

    def backward():
        prev = 0.0
        for b in buckets:
            _spin((b.ready_s - prev) * slowdown)
            prev = b.ready_s
            with lock:
                handed.append(b.size_bytes)
                lock.notify()

    def allreduce():
        for i in range(len(buckets)):
            with lock:
                lock.wait_for(lambda: len(handed) > i)
                size = handed[i]
            _spin(cost(size) * slowdown)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=backward), threading.Thread(target=allreduce)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return (time.perf_counter() - t0) / slowdown


def run() -> dict:
    add = builtin_add_cost()
    profiles = tuple(load_profile(m) for m in V100_BATCH_S)

    def make(**kw):
        kw.pop("algo", None)
        return CostModel(add_cost=add, **kw)
    t0 = time.perf_counter()
    rows = list(run_sweep(SweepAxes(profiles=profiles, compression=PAPER_COMPRESSION), FusionPolicy(), make))
    ours_s = time.perf_counter() - t0
    # One point replayed in real time, and the sum of every point's slowed-down replay length.
    point = CostModel(add_cost=add, bandwidth_Bps=10e9 / 8, num_workers=32)
    t1 = time.perf_counter()
    measured_sync = realtime_replay(profiles[0], FusionPolicy(), point)
    one_point_s = time.perf_counter() - t1
    replay_total_s = sum(r["t_sync_s"] for r in rows) * SLOWDOWN
    ours_point = next(r for r in rows if r["model"] == profiles[0].model and r["workers"] == 32
                      and r["bandwidth_Gbps"] == 10 and r["compression"] == 1)
    return {"points": len(rows), "ours_s": ours_s, "replay_one_point_s": one_point_s,
            "replay_total_s": replay_total_s, "ratio": replay_total_s / ours_s,
            "replay_t_sync_s": measured_sync, "ours_t_sync_s": ours_point["t_sync_s"]}

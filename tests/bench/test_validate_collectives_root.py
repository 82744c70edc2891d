"""`validate collectives` for real (root), small: all-gather and all-to-all on emulated stars of 2 and 4 hosts,
2 sizes, 2 iterations (about 10 s). The namespaces are gone afterwards, also when the run is interrupted.

Beware, as for every root test: it tears down any emulated cluster that is up on this machine.
"""

import math

import pytest

from fabriclab.bench.validate.collectives import measure
from fabriclab.bench.validate.collectives.config import CheckConfig
from fabriclab.bench.validate.collectives.measure import run_check
from fabriclab.emu import netns
from fabriclab.fabric.cluster import prior_cluster
from fabriclab.nccl.predict import collective_times

pytestmark = pytest.mark.root

SMALL = CheckConfig(ops=("allgather", "alltoall"), hosts=4, calibrate_hosts=2, sizes_bytes=(256 << 10, 2 << 20),
                    iters=2, warmup=1, timeout_s=60)


def _predicts(op: str) -> bool:
    try:
        collective_times(prior_cluster(gpus_per_server=1, library="gloo"), 4, [1 << 20], op)
    except ValueError:
        return False
    return True


def test_a_small_check_measures_both_ops_predicts_4_hosts_and_leaves_no_namespace(emu_root):
    results = run_check(SMALL)
    rows = results["rows"]
    assert [(r["op"], r["num_hosts"], r["size_bytes"]) for r in rows] == [
        (op, n, s) for op in SMALL.ops for n in (2, 4) for s in SMALL.sizes_bytes]
    assert all(r["num_wrong"] == 0 and r["measured_us"] > 0 and r["measured_busbw_GBps"] > 0 for r in rows)
    for op in SMALL.ops:
        predicted = [r for r in rows if r["op"] == op and r["role"] == "check" and r["predicted_us"] is not None]
        if op == "allgather" or _predicts(op):
            assert len(predicted) == len(SMALL.sizes_bytes), op
            assert all(math.isfinite(r["error_pct"]) and r["predicted_busbw_GBps"] > 0 for r in predicted)
    # 2 MB moves 1.5 MB per host link at 1 Gbit/s (12 ms): the wire dominates even on a busy machine
    wire = [r for r in rows if r["size_bytes"] == 2 << 20]
    assert all(0.02 < r["measured_busbw_GBps"] < 0.125 for r in wire), wire
    assert results["measurements"]["4"]["hop_latency_s"] > 0 and results["wall_s"] > 0
    assert netns.our_namespaces() == []


def test_an_interrupted_check_tears_the_cluster_down(emu_root, monkeypatch):
    seen = []

    def interrupted(*args, **kwargs):
        seen.append(list(netns.our_namespaces()))
        raise KeyboardInterrupt

    monkeypatch.setattr(measure, "run_in_cluster", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_check(SMALL)
    assert len(seen) == 1 and len(seen[0]) == 3  # 2 hosts and the switch were up
    assert netns.our_namespaces() == []

"""Routing as the fabric does it (`nccl/routing.py`) and congestion control (`nccl/congestion.py`), checked
against closed forms: hashed flows that meet on one up-link, the mean throughput of per-message hashing, the
adaptive spread, the DCQCN onset / settle / recovery arithmetic, and what the cluster file and the CLI carry."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from fabriclab.fabric.cluster import NetworkSpec, check_cluster, from_dict, to_dict
from fabriclab.fabric.presets import cluster_preset
from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.nccl.congestion import TRANSPORTS, Overload, congested_seconds
from fabriclab.nccl.predict import collective_times
from fabriclab.nccl.routing import draws, median_p90, route_effects, routing_factor


def _two_leaves(bisection: float):
    """4 servers of 8 GPUs and 8 NICs, leaves of 16 NICs: servers 0-1 on leaf 0, 2-3 on leaf 1."""
    return gpu_cluster_topology(num_servers=4, gpus_per_server=8, nics_per_server=8, nic="NDR", pcie="PCIe5x16",
                                fabric="fat-tree", leaf_ports=16, bisection=bisection)


def _net(**changes) -> NetworkSpec:
    return replace(NetworkSpec(fabric="fat-tree"), **changes)


def test_ideal_routing_changes_nothing():
    topo = _two_leaves(0.5)
    src, dst = np.arange(8), np.arange(16, 24)
    assert routing_factor(topo, src, dst, np.ones(8), _net()) == 1.0


def test_two_hashed_flows_share_an_uplink_half_the_time():
    """Two flows from two NICs of leaf 0 to leaf 1 over 2 spines (1/8 bisection of 16 ports): a persistent
    hash puts them on one up-link with probability 1/2, and then each moves at half its rate."""
    topo = _two_leaves(1 / 8)
    assert topo.router.num_spines == 2
    src, dst = np.array([8, 9]), np.array([16, 17])
    factors = [routing_factor(topo, src, dst, np.ones(2), _net(routing="ecmp", routing_seed=s)) for s in range(400)]
    assert set(np.round(factors, 9)) == {1.0, 2.0}
    assert 0.4 < np.mean(np.isclose(factors, 2.0)) < 0.6


def test_flows_of_one_nic_never_overload_an_uplink_of_its_rate():
    """16 channels from one NIC hashed anyhow: together they ask one NIC's rate, which any up-link carries."""
    topo = _two_leaves(1 / 4)
    src, dst = np.full(16, 8), np.full(16, 16)
    for seed in range(20):
        assert routing_factor(topo, src, dst, np.ones(16), _net(routing="ecmp", routing_seed=seed)) == 1.0


def test_per_message_hashing_loses_what_balls_in_bins_say():
    """16 flows (2 per NIC of 8 NICs, each at half a link) re-hashed per message over 8 up-links: the mean
    throughput is E[sum of min(n/2, 1)] / 8 = 0.747 of the D-mod-K one (n ~ Binomial(16, 1/8))."""
    topo = _two_leaves(0.5)
    assert topo.router.num_spines == 8
    src, dst = np.repeat(np.arange(8, 16), 2), np.repeat(np.arange(16, 24), 2)
    p0, p1 = (7 / 8) ** 16, 16 / 8 * (7 / 8) ** 15
    expected = 1 / ((p1 * 0.5 + (1 - p0 - p1)) * 8 / 8)
    got = np.mean([routing_factor(topo, src, dst, np.ones(16), _net(routing="ecmp", hash_per_message=True,
                                                                     routing_seed=s)) for s in range(8)])
    assert got == pytest.approx(expected, rel=0.05)


def test_adaptive_spreads_what_d_mod_k_piles_on_one_uplink():
    """Two flows from NICs 0 and 4 of a server on leaf 0 to NICs 0 and 4 of a server on leaf 1: D-mod-K
    sends both over spine 0 (port 16 and 20 are 0 mod the 4 spines of a 1/4 tree), two NICs' worth on one
    up-link; adaptive routing spreads them over all 4, so the NICs bound them again: half the time."""
    topo = _two_leaves(1 / 4)
    src, dst = np.array([8, 12]), np.array([16, 20])
    assert {int(topo.router.nic_spine[d // 8, d % 8]) for d in dst} == {0}
    factor, over, _ = route_effects(topo, src, dst, np.ones(2), _net(routing="adaptive"))
    assert factor == pytest.approx(0.5) and over == pytest.approx(0.5)
    assert route_effects(topo, src, dst, np.ones(2), _net())[1] == pytest.approx(2.0)  # D-mod-K's overload


def test_a_draw_is_the_same_in_every_process():
    """The hashes are a function of the seed, not of the Python process (str hashes are salted per process)."""
    import os
    import subprocess
    import sys

    code = ("from fabriclab.fabric.presets import cluster_preset as c; from fabriclab.nccl.predict import "
            "collective_times as t; print(t(c('roce-h100'), 64, [256 << 20], 'allreduce')[0][0])")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": str(h)}).stdout for h in (1, 2, 3)}
    assert len(outs) == 1 and float(outs.pop()) > 0


def test_nvls_tree_is_moved_only_by_what_the_fabric_adds():
    """Two servers on one leaf: no spine, so InfiniBand credits or adaptive routing add nothing to NCCL's
    NVLS-tree estimate; an oversubscribed hashed RoCE tier does."""
    c = cluster_preset("dgx-h100")
    base = collective_times(c, 16, [1 << 30], "allreduce")
    for changes in ({"transport": "ib"}, {"routing": "adaptive"}):
        moved = collective_times(replace(c, network=replace(c.network, **changes)), 16, [1 << 30], "allreduce")
        assert moved[1] == base[1] == ["nvls_tree/Simple"] and moved[0][0] == base[0][0]
    roce = cluster_preset("roce-h100")
    tight = replace(roce, network=replace(roce.network, leaf_ports=16, bisection=0.25))
    t, pick = collective_times(tight, 32, [64 << 20], "allreduce")
    plain = replace(tight, network=replace(tight.network, bisection=1.0, routing="ideal", transport="ideal"))
    assert pick == ["nvls_tree/Simple"] and t[0] > 1.5 * collective_times(plain, 32, [64 << 20], "allreduce")[0][0]


@pytest.mark.parametrize("ratio", [0.5, 1.0])
@pytest.mark.parametrize("restarts", [True, False])
def test_no_overload_no_congestion(ratio, restarts):
    assert congested_seconds([1e-3], Overload(ratio, 50e9, restarts), "roce")[0] == 1e-3


def test_dcqcn_onset_settle_and_recovery():
    model = TRANSPORTS["roce"]
    onset = model.onset_bytes / 50e9  # at overload 2: the excess is one link rate
    t = 10 * onset
    restarting, steady = Overload(2.0, 50e9, True), Overload(2.0, 50e9, False)
    assert congested_seconds([t], restarting, "roce")[0] == pytest.approx(onset + (t - onset) / model.settle_restart)
    assert congested_seconds([t], steady, "roce")[0] == pytest.approx(
        onset + (t - onset) / model.settle_steady + model.recovery_s)
    for over in (restarting, steady):  # done before the first cut: nothing changes
        assert congested_seconds([onset / 2], over, "roce")[0] == pytest.approx(onset / 2)
    assert congested_seconds([t], steady, "ib")[0] == t and congested_seconds([t], steady, "ideal")[0] == t


def test_a_roce_fabric_at_quarter_bisection_is_slower_than_ideal_routing():
    c = cluster_preset("roce-h100")
    quarter = replace(c, network=replace(c.network, leaf_ports=16, bisection=0.25))
    ideal = replace(quarter, network=replace(quarter.network, routing="ideal", transport="ideal"))
    roce, _ = collective_times(quarter, 32, [256 << 20], "allgather")
    flow, _ = collective_times(ideal, 32, [256 << 20], "allgather")
    assert roce[0] > 1.3 * flow[0]  # the ring's few flows collide on the hashed up-links
    roce, _ = collective_times(quarter, 32, [256 << 20], "alltoall")
    flow, _ = collective_times(ideal, 32, [256 << 20], "alltoall")
    assert roce[0] >= flow[0] + TRANSPORTS["roce"].recovery_s  # many flows spread; the cut ones end late


def test_draws_and_their_median():
    c = cluster_preset("roce-h100")
    assert [d.network.routing_seed for d in draws(c, 3)] == [0, 1, 2]
    assert len(draws(cluster_preset("dgx-h100"), 5)) == 1  # nothing drawn on D-mod-K
    median, p90 = median_p90([[1.0, 2.0], [3.0, 2.0], [2.0, 2.0]])
    assert list(median) == [2.0, 2.0] and p90[0] == pytest.approx(2.8)


def test_the_cluster_file_keeps_the_routing_and_checks_it():
    c = cluster_preset("roce-h100")
    data = to_dict(c)
    assert data["network"]["routing"] == "ecmp" and data["network"]["transport"] == "roce"
    assert from_dict(json.loads(json.dumps(data))).network == c.network
    assert "routing" not in to_dict(cluster_preset("dgx-h100"))["network"]  # files read as before
    for key, value in (("routing", "spray"), ("transport", "tcp"), ("qps_per_connection", 0)):
        with pytest.raises(ValueError, match=f"network.{key}"):
            check_cluster(replace(c, network=replace(c.network, **{key: value})))


def test_a_scattered_job_spreads_over_more_servers_and_shares_their_leaves():
    from fabriclab.nccl.links import job_server_map

    n = replace(NetworkSpec(), placement="scattered", busy_share=0.5, routing_seed=3)
    total, where = job_server_map(n, 32)
    assert total == 64 and len(where) == 32 and list(where) == sorted(set(where)) and max(where) < 64
    assert job_server_map(replace(n, routing_seed=4), 32)[1] != where  # another launch, other servers
    assert job_server_map(replace(n, busy_share=0.0), 32) == (32, None)  # nobody else: packed
    assert job_server_map(replace(n, placement="packed"), 32) == (32, None)


def test_scattered_on_a_busy_oversubscribed_tree_is_slower_and_adaptive_routing_does_not_save_it():
    """At 1/4 the others' load on the up-links the job's rings cross slows it, whatever the routing; on a
    non-blocking tree adaptive routing spreads everyone and the job runs as if alone."""
    c = cluster_preset("roce-h100")

    def t(bisection, routing, placement):
        n = replace(c.network, bisection=bisection, routing=routing, transport="ideal", placement=placement,
                    busy_share=0.5)
        return collective_times(replace(c, network=n), 256, [1 << 30], "allgather")[0][0]

    # 1 GiB: the bytes outlast the 256-rank ring's step latency, under which the others' load would hide
    assert t(0.25, "adaptive", "scattered") > 1.3 * t(0.25, "adaptive", "packed")
    assert t(1.0, "adaptive", "scattered") == pytest.approx(t(1.0, "adaptive", "packed"))
    assert t(1.0, "ideal", "scattered") > t(1.0, "ideal", "packed")  # D-mod-K pins the job onto others' links


def test_the_cluster_file_keeps_a_placement():
    c = cluster_preset("roce-h100")
    scattered = replace(c, network=replace(c.network, placement="scattered", busy_share=0.25))
    assert from_dict(json.loads(json.dumps(to_dict(scattered)))).network == scattered.network
    with pytest.raises(ValueError, match="network.busy_share"):
        check_cluster(replace(c, network=replace(c.network, busy_share=1.0)))
    with pytest.raises(ValueError, match="network.placement"):
        check_cluster(replace(c, network=replace(c.network, placement="random")))


def test_what_the_fabric_adds_hides_under_the_steps_latency_until_the_bytes_outlast_it():
    """Hashed rings on a 4:1 tree: the added data time costs a latency-bound all-gather nothing and a
    bytes-bound one most of it, so the slowdown grows with size; without the hiding it would not start at 1."""
    c = cluster_preset("roce-h100")

    def t(bisection, routing, size):
        n = replace(c.network, bisection=bisection, routing=routing, transport="ideal")
        return collective_times(replace(c, network=n), 256, [size], "allgather")[0][0]

    slowdown = [t(0.25, "ecmp", s) / t(1.0, "ideal", s) for s in (8 << 20, 512 << 20, 2 << 30)]
    assert slowdown[0] == pytest.approx(1.0)
    assert 1.3 < slowdown[1] < slowdown[2]

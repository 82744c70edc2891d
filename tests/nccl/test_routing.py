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


def test_adaptive_spreads_a_leaf_over_its_uplinks():
    """Eight flows all to destinations D-mod-K puts on one spine: adaptive routing spreads them over four."""
    topo = _two_leaves(1 / 4)
    dst = np.full(8, 16)  # one destination GPU: D-mod-K sends every flow over its one spine
    src = np.arange(8, 16)
    ideal = route_effects(topo, src, dst, np.ones(8), _net())
    adaptive = route_effects(topo, src, dst, np.ones(8), _net(routing="adaptive"))
    assert adaptive[0] <= 1.0 and adaptive[1] <= ideal[1]


@pytest.mark.parametrize("ratio", [0.5, 1.0])
def test_no_overload_no_congestion(ratio):
    assert congested_seconds([1e-3], Overload(ratio, 50e9, True), "roce")[0] == 1e-3


def test_dcqcn_onset_settle_and_recovery():
    model = TRANSPORTS["roce"]
    over = Overload(2.0, 50e9, False)
    onset = model.onset_bytes / 50e9
    t = 10e-3
    assert congested_seconds([t], over, "roce")[0] == pytest.approx(onset + (t - onset) / model.settle_share)
    assert congested_seconds([onset / 2], over, "roce")[0] == pytest.approx(onset / 2)  # done before the cut
    a2a = congested_seconds([onset / 2], Overload(2.0, 50e9, True), "roce")[0]
    assert a2a == pytest.approx(onset + model.recovery_s)
    assert congested_seconds([t], over, "ib")[0] == t and congested_seconds([t], over, "ideal")[0] == t


def test_a_roce_fabric_at_quarter_bisection_is_slower_than_ideal_routing():
    c = cluster_preset("roce-h100")
    quarter = replace(c, network=replace(c.network, leaf_ports=16, bisection=0.25))
    ideal = replace(quarter, network=replace(quarter.network, routing="ideal", transport="ideal"))
    for collective in ("allgather", "alltoall"):
        roce, _ = collective_times(quarter, 32, [256 << 20], collective)
        flow, _ = collective_times(ideal, 32, [256 << 20], collective)
        assert roce[0] > 1.3 * flow[0]


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

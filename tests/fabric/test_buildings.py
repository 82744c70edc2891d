"""The third tier (fabric/buildings.py): traffic counted from each pattern, the link time and the latency."""

from dataclasses import replace

import numpy as np
import pytest

from fabriclab.collectives.trees import dtree_parents as dtree_lists
from fabriclab.fabric.buildings import (dtree_parents, num_buildings, tier_latency_s, tier_seconds_per_unit)
from fabriclab.fabric.cluster import NetworkSpec
from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.links import link_seconds_per_byte


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 12, 17, 64, 100, 255])
def test_numpy_trees_are_nccls_trees(n):
    first, second = dtree_parents(n)
    assert (first.tolist(), second.tolist()) == dtree_lists(n)


def _brute_tree_units(servers, spb, channels):
    out = np.zeros(-(-servers // spb))
    for c in range(channels):
        parents = dtree_lists(servers)[c % 2]
        for child, parent in enumerate(parents):
            if parent >= 0 and child // spb != parent // spb:
                out[child // spb] += 1 / channels
                out[parent // spb] += 1 / channels
    return out


@pytest.mark.parametrize("servers,spb,channels", [(40, 8, 4), (37, 10, 3), (64, 16, 16), (9, 4, 1)])
def test_tree_traffic_counts_every_edge_between_buildings(servers, spb, channels):
    net = NetworkSpec(servers_per_building=spb, building_bandwidth_Bps=1.0)
    expect = _brute_tree_units(servers, spb, channels).max()
    assert tier_seconds_per_unit(net, servers, 8, 1.0, "tree", "allreduce", channels) == pytest.approx(expect)


def test_ring_all_to_all_and_sendrecv_counts():
    net = NetworkSpec(servers_per_building=10, building_bandwidth_Bps=4.0)
    # a ring leaves each building once per channel, one unit per bus byte
    assert tier_seconds_per_unit(net, 30, 8, 1.0, "ring", "allreduce", 16) == pytest.approx(1 / 4)
    assert tier_seconds_per_unit(net, 30, 8, 1.0, "p2p", "sendrecv", 0) == pytest.approx(1 / 4)
    # all-to-all: a building of g of n GPUs sends g (n - g) / n; the last building holds 5 servers
    n, g = 25 * 8, 10 * 8
    assert tier_seconds_per_unit(net, 25, 8, 1.0, "p2p", "alltoall", 0) == pytest.approx(g * (n - g) / n / 4)
    # no bandwidth given: the building's NICs (10 servers x 2.0 B/s each)
    free = replace(net, building_bandwidth_Bps=0.0)
    assert tier_seconds_per_unit(free, 30, 8, 2.0, "ring", "allreduce", 16) == pytest.approx(1 / 20)
    assert tier_seconds_per_unit(free, 10, 8, 2.0, "ring", "allreduce", 16) == 0.0  # one building
    assert num_buildings(free, 31) == 4 and num_buildings(NetworkSpec(), 10 ** 6) == 1


def test_latency_crossings():
    net = NetworkSpec(servers_per_building=4, building_latency_s=1e-5)
    assert tier_latency_s(net, 16, "ring", "allreduce") == pytest.approx(8e-5)  # 4 buildings, twice round
    assert tier_latency_s(net, 16, "ring", "allgather") == pytest.approx(4e-5)
    assert tier_latency_s(net, 16, "tree", "allreduce") == pytest.approx(4e-5)  # 2 ceil(log2 4) crossings
    assert tier_latency_s(net, 16, "p2p", "alltoall") == pytest.approx(1e-5)
    assert tier_latency_s(net, 4, "ring", "allreduce") == 0.0


def test_link_time_is_the_slower_of_one_building_and_the_tier():
    base = cluster_preset("dgx-h100")
    one = link_seconds_per_byte(base, 64, "ring", "allreduce")  # 8 servers: one building alone
    for tier_Bps, slower in ((1e15, "building"), (1e9, "tier")):
        net = replace(base.network, servers_per_building=8, building_bandwidth_Bps=tier_Bps)
        campus = replace(base, network=net)
        got = link_seconds_per_byte(campus, 256, "ring", "allreduce")
        # per bus byte: one building's time per bus byte, or one unit over the tier; times the bus factor of 256
        factor = 2 * 255 / 256
        expect = max(one / (2 * 63 / 64), 1 / tier_Bps) * factor
        assert got == pytest.approx(expect, rel=1e-12), slower


@pytest.mark.parametrize("key,value,says", [("servers_per_building", -1, "give a number >= 0"),
                                            ("servers_per_building", 2.5, "give a whole number of servers"),
                                            ("building_bandwidth_Bps", -1.0, "give a number >= 0"),
                                            ("building_latency_s", float("nan"), "give a number >= 0")])
def test_a_cluster_file_with_a_bad_third_tier_is_refused(key, value, says):
    from fabriclab.fabric.cluster import check_cluster

    cluster = cluster_preset("dgx-h100-campus")
    bad = replace(cluster, network=replace(cluster.network, **{key: value}))
    with pytest.raises(ValueError, match=f"network.{key} is .*{says}"):
        check_cluster(bad, "c.json")

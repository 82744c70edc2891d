"""Link times of NCCL's patterns (`nccl/links.py`): the class engine against the general one, and the physics."""

from dataclasses import replace

import pytest

from fabriclab.fabric.cluster import a100_hdr_prior
from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.layout import MAX_CLUSTER_GPUS, check_cluster_gpus
from fabriclab.nccl.links import link_seconds_per_byte


def _network(cluster, **kw):
    return replace(cluster, network=replace(cluster.network, **kw))


CLUSTERS = {
    "dgx-h100-rail": lambda: _network(cluster_preset("dgx-h100"), leaf_ports=4),
    "dgx-h100-rail-1/4": lambda: _network(cluster_preset("dgx-h100"), leaf_ports=4, bisection=0.25),
    "dgx-h100-plain-1/2": lambda: _network(cluster_preset("dgx-h100"), fabric="fat-tree", leaf_ports=16,
                                           bisection=0.5),
    "a100-plain-1/8": lambda: _network(a100_hdr_prior(), fabric="fat-tree", leaf_ports=16, bisection=0.125),
    "a100-plain-1/3": lambda: _network(a100_hdr_prior(), fabric="fat-tree", leaf_ports=12, bisection=1 / 3),
    "tx-gaia": lambda: _network(cluster_preset("tx-gaia-25gbe"), leaf_ports=6, bisection=0.5),
}
PATTERNS = [("ring", "allreduce"), ("tree", "allreduce"), ("ring", "allgather"), ("p2p", "sendrecv"),
            ("p2p", "alltoall")]


@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.parametrize("algorithm, collective", PATTERNS)
def test_classes_agree_with_the_general_engine(name, algorithm, collective):
    cluster = CLUSTERS[name]()
    g = cluster.server.gpus_per_server
    counts = [g // 2, 16, 64, 256] + ([1024] if algorithm != "p2p" or collective == "sendrecv" else [])
    for n in counts:
        if n < 1 or (n > g and n % g):
            continue
        general = link_seconds_per_byte(cluster, n, algorithm, collective, engine="general")
        assert link_seconds_per_byte(cluster, n, algorithm, collective) == pytest.approx(general, rel=1e-9), n


def test_an_oversubscribed_plain_fat_tree_slows_all_to_all_but_not_a_ring():
    full = _network(cluster_preset("dgx-h100"), fabric="fat-tree", leaf_ports=32, bisection=1.0)
    quarter = _network(full, bisection=0.25)
    for n in (256, 1024):
        assert link_seconds_per_byte(quarter, n, "p2p", "alltoall") > 3 * link_seconds_per_byte(full, n, "p2p",
                                                                                                  "alltoall")
        assert link_seconds_per_byte(quarter, n, "ring", "allreduce") == pytest.approx(
            link_seconds_per_byte(full, n, "ring", "allreduce"), rel=1e-6)


@pytest.mark.parametrize("n", [64, 1024, 100000])
def test_rail_all_to_all_with_pxn_is_nic_limited(n):
    # PXN keeps every message on its destination's rail, and D-mod-K spreads a leaf over the spines: each NIC
    # sends its server's 8 GPUs' data for the other servers' GPU on its rail, (n - 8) / n of a buffer
    cluster = cluster_preset("dgx-h100")
    s = cluster.server
    nic = s.nic_bandwidth_Bps * s.nic_efficiency
    assert link_seconds_per_byte(cluster, n, "p2p", "alltoall") == pytest.approx((n - 8) / n / nic, rel=1e-4)


def test_sendrecv_crosses_one_nic_at_a_time():
    cluster = cluster_preset("dgx-h100")
    s = cluster.server
    assert link_seconds_per_byte(cluster, 8, "p2p", "sendrecv") == pytest.approx(1 / s.intra_bandwidth_Bps, rel=1e-4)
    assert link_seconds_per_byte(cluster, 64, "p2p", "sendrecv") == pytest.approx(
        1 / (s.nic_bandwidth_Bps * s.nic_efficiency), rel=1e-4)


def test_bad_input_says_what_to_change():
    cluster = cluster_preset("dgx-h100")
    with pytest.raises(ValueError, match="algorithm 'mesh': use one of ring, tree, p2p"):
        link_seconds_per_byte(cluster, 16, "mesh", "allreduce")
    with pytest.raises(ValueError, match="collective 'allreduce' is not point-to-point: p2p takes alltoall, sendrecv"):
        link_seconds_per_byte(cluster, 16, "p2p", "allreduce")
    with pytest.raises(ValueError, match="engine 'fast': use one of auto, general"):
        link_seconds_per_byte(cluster, 16, "ring", "allreduce", engine="fast")
    with pytest.raises(ValueError, match="the general engine takes at most 2,000,000"):
        link_seconds_per_byte(cluster, 2048, "p2p", "alltoall", engine="general")
    assert MAX_CLUSTER_GPUS == 131072 and check_cluster_gpus(cluster, 131072).num_servers == 16384
    with pytest.raises(ValueError, match="--gpus 131080: a cluster prediction takes at most 131072 GPUs in one "
                                         "building here .*network\\.servers_per_building"):
        check_cluster_gpus(cluster, 131080)
    campus = cluster_preset("dgx-h100-campus")
    assert check_cluster_gpus(campus, 1_000_000).num_servers == 125_000
    with pytest.raises(ValueError, match="at most 1,048,576 GPUs"):
        check_cluster_gpus(campus, (1 << 20) + 8)


def test_each_nic_carries_one_channel_of_each_of_the_two_trees():
    """NCCL duplicates its tree channels (`connectTrees`, src/graph/connect.cc): channel c + nChannels runs the
    dual tree on channel c's GPU and NIC. On 8 servers of dgx-h100 (16 channels, 8 NICs) a NIC is then an inner
    node of one tree (2 children and a parent: 3 channel shares in) and a leaf of the other (1 share): 4 shares
    of 1/16 of the buffer; with both of its channels in one tree it carried 6, and 64-GPU all-reduces of 128 MB
    to 1 GB came out 25-30 % under the measured (examples/nccl-corpus/h100-ndr-8node)."""
    c = cluster_preset("dgx-h100")
    nic = c.server.nic_bandwidth_Bps * c.server.nic_efficiency
    for gpus in (64, 128):
        shares = link_seconds_per_byte(c, gpus, "tree", "allreduce") * nic * c.library.num_channels
        assert shares == pytest.approx(4.0, rel=1e-3)

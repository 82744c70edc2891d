"""GPU servers on rail-optimised and plain fat trees: nodes, routes (PXN, rails, spines), errors."""

import pytest

from fabriclab.fabric.rail import gpu_cluster_topology


def _names(topo, a, b):
    return [topo.link_name(link) for link in topo.route(a, b)]


def test_rail_route_stays_on_the_destination_rail():
    topo = gpu_cluster_topology(num_servers=4)
    assert topo.num_endpoints == 32 and topo.num_hosts == 4
    assert _names(topo, 0, 1) == ["s0.gpu0->s0.nvsw", "s0.nvsw->s0.gpu1"]
    # GPU 1 of server 0 to GPU 0 of server 1: over NVLink to GPU 0, out of NIC 0, rail 0's leaf, in
    assert _names(topo, 1, 8) == ["s0.gpu1->s0.nvsw", "s0.nvsw->s0.gpu0", "s0.gpu0->s0.nic0", "s0.nic0->leaf0",
                                  "leaf0->s1.nic0", "s1.nic0->s1.gpu0"]
    assert not any("spine" in n for a in range(32) for b in range(32) for n in _names(topo, a, b))


def test_plain_fat_tree_crosses_spines_between_leaves():
    topo = gpu_cluster_topology(num_servers=8, fabric="fat-tree", leaf_ports=16, bisection=0.5)
    # 16 ports per leaf hold 2 servers of 8 NICs; leaves link to 8 spines
    assert sum(name.startswith("spine") for name in topo.node_names) == 8
    assert not any("spine" in n for n in _names(topo, 0, 8))        # servers 0 and 1 share leaf 0
    route = _names(topo, 0, 16)                                       # server 2 is on leaf 1
    assert route[1:4] == ["s0.nic0->leaf0", "leaf0->spine0", "spine0->leaf1"]


def test_pcie_servers_share_a_nic():
    # Samsi et al.'s TX-GAIA nodes: 2 V100s and one NIC per node
    topo = gpu_cluster_topology(num_servers=3, gpus_per_server=2, intra="pcie", intra_link="PCIe3x16",
                                pcie="PCIe3x16", nics_per_server=1, nic="25GbE")
    assert _names(topo, 0, 1) == ["s0.gpu0->s0.nic0", "s0.nic0->s0.gpu1"]
    assert _names(topo, 1, 4) == ["s0.gpu1->s0.nic0", "s0.nic0->leaf0", "leaf0->s2.nic0", "s2.nic0->s2.gpu0"]
    two_nics = gpu_cluster_topology(num_servers=2, gpus_per_server=4, intra="pcie", nics_per_server=2)
    assert _names(two_nics, 0, 7)[-3:] == ["s1.nic0->s1.cpu", "s1.cpu->s1.nic1", "s1.nic1->s1.gpu3"]


@pytest.mark.parametrize("kwargs, words", [
    ({"num_servers": 0}, "num_servers=0"),
    ({"num_servers": 2, "nics_per_server": 3}, "cannot share 3 NICs"),
    ({"num_servers": 2, "fabric": "torus"}, "fabric='torus'"),
    ({"num_servers": 2, "intra": "infinity"}, "intra='infinity'"),
    ({"num_servers": 2, "bisection": 0}, "bisection=0"),
])
def test_bad_input(kwargs, words):
    with pytest.raises(ValueError, match=words):
        gpu_cluster_topology(**kwargs)

"""The kinds of a GPU cluster's nodes come from its numbering, and agree with their names."""

import numpy as np
import pytest

from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.whatif.llm import links


@pytest.mark.parametrize("intra,nics,fabric", [("nvswitch", 8, "rail"), ("pcie", 1, "fat-tree"),
                                               ("pcie", 2, "fat-tree"), ("nvswitch", 4, "fat-tree")])
def test_node_kinds_from_numbering_equal_those_from_names(intra, nics, fabric):
    topo = gpu_cluster_topology(num_servers=40, gpus_per_server=8, intra=intra, nics_per_server=nics,
                                fabric=fabric, leaf_ports=8)

    class Named:  # the same nodes without the router: kinds from the names
        node_names = topo.node_names

    fast = links._node_kinds(topo)
    assert fast.shape == (len(topo.node_names),)
    np.testing.assert_array_equal(fast, links._node_kinds(Named()))
    assert {0, 1, 2, 3} >= set(fast.tolist()) and (fast == 3).any()

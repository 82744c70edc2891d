"""All-to-all in server classes (`sim/pairwise.py`) against every transfer: the general engine and the batch."""

import numpy as np
import pytest

from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.sim.batch import explicit_batch, makespan_s
from fabriclab.sim.engine import TaskGraph, run
from fabriclab.sim.pairwise import all_to_all_batch, refine_servers

SIZE = 1e6


def _all_pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.nonzero(~np.eye(n, dtype=bool))


@pytest.mark.parametrize("shape", [
    dict(num_servers=4, leaf_ports=2, bisection=1.0),                                    # rail, 2 leaves a rail
    dict(num_servers=5, leaf_ports=2, bisection=0.5),                                    # a partial leaf
    dict(num_servers=6, fabric="fat-tree", leaf_ports=16, bisection=0.25),               # whole servers a leaf
    dict(num_servers=5, fabric="fat-tree", leaf_ports=12, bisection=1 / 3),              # servers astride leaves
    dict(num_servers=7, gpus_per_server=2, nics_per_server=1, intra="pcie", fabric="fat-tree", leaf_ports=3),
    dict(num_servers=5, gpus_per_server=4, nics_per_server=2, intra="pcie", leaf_ports=2, bisection=0.5),
])
def test_all_to_all_classes_match_the_general_engine(shape):
    topo = gpu_cluster_topology(**shape)
    src, dst = _all_pairs(topo.num_endpoints)
    graph = TaskGraph()
    for a, b in zip(src.tolist(), dst.tolist()):
        graph.add_transfer(a, b, SIZE)
    general = run(graph, topo).makespan_s
    batch = all_to_all_batch(topo, SIZE)
    assert batch.num_flows.sum() == src.size
    assert makespan_s(batch, topo) == pytest.approx(general, rel=1e-9)


@pytest.mark.parametrize("servers", [2, 3, 9, 17])
@pytest.mark.parametrize("fabric, ports, bisection", [("rail", 4, 1.0), ("rail", 5, 0.4), ("fat-tree", 8, 0.5),
                                                      ("fat-tree", 20, 0.25)])
def test_all_to_all_classes_match_every_transfer(servers, fabric, ports, bisection):
    topo = gpu_cluster_topology(num_servers=servers, gpus_per_server=4, nics_per_server=4, fabric=fabric,
                                leaf_ports=ports, bisection=bisection)
    src, dst = _all_pairs(topo.num_endpoints)
    assert makespan_s(all_to_all_batch(topo, SIZE), topo) == pytest.approx(
        makespan_s(explicit_batch(topo, src, dst, SIZE), topo), rel=1e-9)


def test_servers_alike_share_a_class():
    # 12,500 DGX servers on 32-port rail leaves, D-mod-K on 32 spines: a server's class is its spine and
    # whether its leaf is the partial last one (12,500 = 390 x 32 + 20)
    topo = gpu_cluster_topology(num_servers=12500, leaf_ports=32, nic="NDR")
    cls, leaf_cls = refine_servers(topo.router)
    assert cls.max() + 1 == 32 + 20 and leaf_cls.max() + 1 == 16

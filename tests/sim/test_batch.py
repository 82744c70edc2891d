"""Flows that start at once, solved in classes (`sim/batch.py`), against the general engine on every flow."""

from fractions import Fraction

import numpy as np
import pytest

from fabriclab.fabric import fat_tree, star, torus
from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.sim.batch import explicit_batch, finish_times, makespan_s
from fabriclab.sim.engine import TaskGraph, run
from fabriclab.sim.maxmin import max_min_rates

TOPOLOGIES = {
    "fat-tree-1/4": lambda: fat_tree(levels=2, hosts=32, hosts_per_leaf=8, bisection=Fraction(1, 4),
                                     link_Bps=4e9, latency_s=1e-6),
    "star-2gpus": lambda: star(hosts=6, gpus_per_server=2, link_Bps=1e9, latency_s=0.5e-6),
    "torus": lambda: torus(dims=(4, 4), link_Bps=2e9, latency_s=0.2e-6),
    "rail": lambda: gpu_cluster_topology(num_servers=5, leaf_ports=2, bisection=0.5),
    "plain-pcie": lambda: gpu_cluster_topology(num_servers=6, gpus_per_server=4, nics_per_server=2, intra="pcie",
                                               fabric="fat-tree", leaf_ports=4, bisection=0.25),
}


def _general(topo, src, dst, size) -> np.ndarray:
    graph = TaskGraph()
    for a, b, s in zip(src.tolist(), dst.tolist(), np.broadcast_to(size, src.shape).tolist()):
        graph.add_transfer(a, b, s)
    return run(graph, topo).finish_s


@pytest.mark.parametrize("name", TOPOLOGIES)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_flow_ends_when_the_general_engine_ends_it(name, seed):
    topo = TOPOLOGIES[name]()
    rng = np.random.default_rng(seed)
    n = topo.num_endpoints
    src, dst = rng.integers(0, n, 300), rng.integers(0, n, 300)  # duplicates and self-transfers included
    size = rng.choice([0.0, 1e6, 3e6, 2**24], 300)
    batch = explicit_batch(topo, src, dst, size)
    assert batch.num_flows.sum() == 300 and batch.num_classes < 300
    general = _general(topo, src, dst, size)
    ours = np.repeat(finish_times(batch, topo.bandwidth_Bps, topo.latency_s), batch.num_flows)
    assert np.allclose(np.sort(ours), np.sort(general), rtol=1e-12, atol=0)
    assert makespan_s(batch, topo) == pytest.approx(general.max(), rel=1e-12)


def test_identical_flows_share_as_one_class():
    capacity = np.array([10.0, 4.0])
    # flows 0 and 1 identical on links 0 and 1, flow 2 on link 0 alone
    ef, el = np.array([0, 0, 1, 1, 2]), np.array([0, 1, 0, 1, 0])
    plain = max_min_rates(ef, el, 3, capacity)
    folded = max_min_rates(np.array([0, 0, 1]), np.array([0, 1, 0]), 2, capacity, np.array([2.0, 2.0, 1.0]))
    assert plain.tolist() == [2.0, 2.0, 6.0] and folded.tolist() == [2.0, 6.0]


def test_a_ring_of_a_thousand_gpus_is_one_solve_per_event():
    topo = gpu_cluster_topology(num_servers=128, leaf_ports=16, fabric="fat-tree", bisection=0.25)
    n = topo.num_endpoints
    src = np.arange(n)
    batch = explicit_batch(topo, src, (src + 1) % n, 1e8)
    assert makespan_s(batch, topo) == pytest.approx(_general(topo, src, (src + 1) % n, 1e8).max(), rel=1e-12)

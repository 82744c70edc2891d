"""Folding a batch by its symmetry (`sim/refine.py`) changes no finish time, and folds rings to a handful."""

from fractions import Fraction

import numpy as np
import pytest

import fabriclab.sim.refine as refine
from fabriclab.fabric import fat_tree
from fabriclab.fabric.rail import gpu_cluster_topology
from fabriclab.sim.batch import explicit_batch, finish_times

TOPOLOGIES = {
    "rail": dict(num_servers=13, leaf_ports=4, bisection=1.0),
    "rail-1/2": dict(num_servers=9, leaf_ports=4, bisection=0.5),
    "plain-1/4": dict(num_servers=12, fabric="fat-tree", leaf_ports=16, bisection=0.25),
    "plain-pcie": dict(num_servers=10, gpus_per_server=4, nics_per_server=2, intra="pcie", fabric="fat-tree",
                       leaf_ports=6, bisection=1 / 3),
}


def _patterns(n: int, g: int, rng) -> dict:
    ranks = np.arange(n)
    rings = [(ranks // g * g + (ranks + c) % g, np.roll(ranks // g * g + (ranks + c) % g, -1)) for c in range(3)]
    heap = np.arange(1, n // g)
    return {"rings": (np.concatenate([a for a, _ in rings]), np.concatenate([b for _, b in rings])),
            "heap": (np.concatenate([heap * g, (heap - 1) // 2 * g]), np.concatenate([(heap - 1) // 2 * g, heap * g])),
            "random": (rng.integers(0, n, 400), rng.integers(0, n, 400))}


def _finishes(batch, topo) -> np.ndarray:
    return np.sort(np.repeat(finish_times(batch, topo.bandwidth_Bps, topo.latency_s), batch.num_flows.astype(int)))


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_the_folded_batch_ends_every_flow_when_the_batch_does(name):
    topo = gpu_cluster_topology(**TOPOLOGIES[name])
    for pattern, (src, dst) in _patterns(topo.num_endpoints, topo.gpus_per_server, np.random.default_rng(7)).items():
        batch = explicit_batch(topo, src, dst, 1e7)
        folded = refine.quotient(batch, topo.bandwidth_Bps[batch.column_link])
        assert folded.num_classes <= batch.num_classes
        assert np.allclose(_finishes(folded, topo), _finishes(batch, topo), rtol=1e-12, atol=0), pattern


def test_a_ring_of_sixteen_channels_folds_to_a_handful():
    topo = gpu_cluster_topology(num_servers=512, leaf_ports=32, nic="NDR")
    n, g = topo.num_endpoints, 8
    ranks = np.arange(n)
    order = [ranks // g * g + (ranks + c) % g for c in range(16)]
    batch = explicit_batch(topo, np.concatenate(order), np.concatenate([np.roll(o, -1) for o in order]), 1e8)
    folded = refine.quotient(batch, topo.bandwidth_Bps[batch.column_link])
    assert batch.num_classes == 8192 and folded.num_classes <= 10
    assert folded.num_flows.sum() == batch.num_flows.sum() == 16 * n


def test_a_fat_tree_of_hosts_folds_too():
    topo = fat_tree(levels=2, hosts=64, hosts_per_leaf=8, bisection=Fraction(1, 2), link_Bps=4e9, latency_s=1e-6)
    src = np.arange(64)
    batch = explicit_batch(topo, src, (src + 8) % 64, 1e8)
    kind = topo.bandwidth_Bps[batch.column_link] + topo.latency_s[batch.column_link]
    folded = refine.quotient(batch, kind)
    assert folded.num_classes < 64 and np.allclose(_finishes(folded, topo), _finishes(batch, topo), rtol=1e-12)


def test_a_colouring_that_is_not_equitable_is_refused(monkeypatch):
    topo = gpu_cluster_topology(**TOPOLOGIES["rail-1/2"])
    src, dst = _patterns(topo.num_endpoints, 8, np.random.default_rng(1))["random"]
    batch = explicit_batch(topo, src, dst, 1e7)
    # a hash collision merging everything: the check must catch it and keep the batch as it is
    monkeypatch.setattr(refine, "colours", lambda b, kind: (np.zeros(b.num_classes, dtype=np.int64),
                                                             np.zeros(b.column_link.size, dtype=np.int64)))
    assert refine.quotient(batch, topo.bandwidth_Bps[batch.column_link]) is batch

"""The level engine (the fast path) gives the general engine's answer wherever it claims exactness."""

from fractions import Fraction
import numpy as np
import pytest

from fabriclab.fabric import fat_tree, place, star
from fabriclab.sim.collective import simulate

S = 2**28
CASES = ["ring", "butterfly", "butterfly:order=far", "layered:group=16", "ps:servers=4", "direct",
         "recursive-doubling", "cb", "chain:chunks=3", "dbtree"]


@pytest.mark.parametrize("algo", CASES)
@pytest.mark.parametrize("bisection", ["1", "1/4", "1/16"])
def test_levels_equal_general_where_exact(algo, bisection):
    topo = fat_tree(levels=2, hosts=32, hosts_per_leaf=16, bisection=Fraction(bisection), link_Bps=4e9, latency_s=1e-6)
    general = simulate("allreduce", algo, topo, 32, S, engine="general")
    levels = simulate("allreduce", algo, topo, 32, S, engine="levels")
    if levels.exact:
        assert levels.time_s == pytest.approx(general.time_s, rel=1e-9)
        assert np.allclose(levels.rank_finish_s, general.rank_finish_s, rtol=1e-9)
        assert np.allclose(levels.link_bytes, general.link_bytes)
    else:
        assert algo in ("dbtree", "chain:chunks=3", "cb"), f"{algo} lost exactness unexpectedly"


def test_the_lock_step_algorithms_of_the_fatness_study_are_exact():
    topo = fat_tree(levels=2, hosts=64, hosts_per_leaf=16, bisection=Fraction("1/8"), link_Bps=1e9, latency_s=1e-6)
    for algo in ("ring", "butterfly", "butterfly:order=far", "layered:group=16", "ps:servers=8"):
        assert simulate("allreduce", algo, topo, 64, S, engine="levels").exact, algo


def test_vectorized_ring_equals_the_schedule_on_random_placement():
    topo = fat_tree(levels=2, hosts=96, hosts_per_leaf=16, bisection=Fraction("1/2"), link_Bps=4e9, latency_s=1e-6)
    where = place(96, topo, "random", seed=3)
    fast = simulate("allreduce", "ring", topo, 96, S, placement=where, engine="levels")
    slow = simulate("allreduce", "ring", topo, 96, S, placement=where, engine="general")
    assert fast.exact == (fast.time_s == pytest.approx(slow.time_s, rel=1e-9)) or not fast.exact
    if fast.exact:
        assert fast.time_s == pytest.approx(slow.time_s, rel=1e-9)


def test_gpus_per_server_share_the_nic():
    from fabriclab.sim.engine import TaskGraph, run

    topo = star(hosts=2, gpus_per_server=2, link_Bps=1e9, latency_s=0)
    g = TaskGraph()
    a, b = g.add_transfer(0, 2, 1e9), g.add_transfer(1, 3, 1e9)
    t = run(g, topo)
    # Both GPUs of host 0 send through its one NIC: half each (PCIe is far faster than 1 GB/s).
    assert t.finish_s[a] == pytest.approx(2.0, rel=1e-3) and t.finish_s[b] == pytest.approx(2.0, rel=1e-3)

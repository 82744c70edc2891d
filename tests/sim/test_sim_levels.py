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


@pytest.mark.parametrize("p, count", [(2, 2), (5, 10), (16, 64), (96, 96 * 7)])
def test_ring_runs_are_the_vectorized_rounds(p, count):
    from fabriclab.collectives import vectorized
    from fabriclab.sim.collective import ring_runs

    runs = ring_runs("allreduce", "ring", p, count, 4)
    expanded = [(lv.src, lv.dst, lv.size_bytes, lv.reduce, lv.src_step + r, lv.dst_step + r)
                for lv in runs for r in range(lv.repeat)]
    rounds = list(vectorized.rounds("allreduce", "ring", p, count))
    assert len(expanded) == len(rounds) == 2 * (p - 1)
    for mine, theirs in zip(expanded, rounds):
        s, d, e, red, ks, kd = theirs
        assert all(np.array_equal(a, b) for a, b in zip(mine, (s, d, e * 4, red, ks, kd)))
    assert ring_runs("allreduce", "ring", 5, 11, 4) is None and ring_runs("allreduce", "butterfly", 4, 8, 4) is None


@pytest.mark.parametrize("placement", ["linear", "random"])
@pytest.mark.parametrize("bisection, gamma", [("1", 0.0), ("1/4", 1e-10), ("1/16", 0.0)])
def test_a_run_of_rounds_skipped_in_its_steady_state_changes_nothing(placement, bisection, gamma):
    from fabriclab.collectives import vectorized
    from fabriclab.sim.collective import ring_runs
    from fabriclab.sim.levels import Level, simulate_levels

    topo = fat_tree(levels=2, hosts=96, hosts_per_leaf=16, bisection=Fraction(bisection), link_Bps=4e9,
                    latency_s=1e-6)
    where = place(96, topo, placement, seed=5)
    count = 96 * 2**16
    runs = simulate_levels(ring_runs("allreduce", "ring", 96, count, 4), 96, topo, where, gamma_s_per_byte=gamma)
    rounds = (Level(s, d, e * 4, r, ks, kd) for s, d, e, r, ks, kd in vectorized.rounds("allreduce", "ring", 96, count))
    one_by_one = simulate_levels(rounds, 96, topo, where, gamma_s_per_byte=gamma)
    assert runs.time_s == pytest.approx(one_by_one.time_s, rel=1e-12)
    assert np.allclose(runs.rank_finish_s, one_by_one.rank_finish_s, rtol=1e-12)
    assert np.allclose(runs.link_bytes, one_by_one.link_bytes, rtol=1e-12)
    assert (runs.num_levels, runs.exact) == (one_by_one.num_levels, one_by_one.exact)

"""The simulator against closed forms: star, pipelines, max-min textbook cases, fat trees."""

from fractions import Fraction
import math

import numpy as np
import pytest

from fabriclab.collectives.costs import cost
from fabriclab.collectives.registry import build_schedule
from fabriclab.fabric import Topology, fat_tree, star
from fabriclab.sim.collective import simulate, simulate_schedule
from fabriclab.sim.engine import TaskGraph, run
from fabriclab.sim.maxmin import max_min_rates

S, B = 2**30, 4e9


def _star(p, latency=0.0):
    return star(hosts=p, link_Bps=B, latency_s=latency)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 16])
def test_ring_on_a_star_is_bandwidth_optimal(p):
    size = p * 2**24
    t = simulate("allreduce", "ring", _star(p), p, size, itemsize=1, engine="general").time_s
    assert t == pytest.approx(2 * (p - 1) / p * size / B, rel=1e-12)


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_binomial_reduce_takes_log_p_messages(p):
    sched = build_schedule("reduce", "binomial", p, S)
    assert simulate_schedule(sched, _star(p)).time_s == pytest.approx(math.log2(p) * S / B, rel=1e-12)


@pytest.mark.parametrize("p, n", [(2, 1), (4, 4), (6, 8), (9, 16)])
def test_chunked_chain_is_s_caffe_model(p, n):
    sched = build_schedule("reduce", f"chain:chunks={n}", p, n * 2**20)
    want = (n + p - 2) * (n * 2**20) / (n * B)
    assert simulate_schedule(sched, _star(p)).time_s == pytest.approx(want, rel=1e-12)


EXACT_ON_A_STAR = ["ring", "butterfly", "butterfly:order=far", "recursive-doubling", "direct",
                   "ps:servers=2", "chain:chunks=4", "binomial", "cb", "cc", "layered",
                   "hierarchical:lower=ring:upper=ring:group=4"]


@pytest.mark.parametrize("algo", EXACT_ON_A_STAR)
@pytest.mark.parametrize("p", [4, 8, 12])
def test_alpha_beta_gamma_closed_forms_match(algo, p):
    lat, gamma = 1e-6, 1e-10
    size = p * 4096 * 4  # divisible by every chunking used here
    got = simulate("allreduce", algo, _star(p, lat), p, size, itemsize=4, gamma_s_per_byte=gamma,
                   engine="general").time_s
    # A message on a star crosses two links: alpha = 2 * latency.
    assert got == pytest.approx(cost("allreduce", algo, p, size, 2 * lat, 1 / B, gamma), rel=1e-9)


def test_two_flows_on_one_link_get_half_each():
    topo = star(hosts=3, link_Bps=B, latency_s=0.0)
    g = TaskGraph()
    a, b = g.add_transfer(0, 2, S), g.add_transfer(1, 2, S)
    timeline = run(g, topo)
    assert timeline.finish_s[a] == timeline.finish_s[b] == pytest.approx(2 * S / B)


def _chain(capacities):
    """Hosts 0..n linked in a line; link i joins host i and i+1 in both directions."""
    n = len(capacities)
    src = [x for i in range(n) for x in (i, i + 1)]
    dst = [x for i in range(n) for x in (i + 1, i)]
    bw = [c for c in capacities for _ in range(2)]
    return Topology(name="line", num_hosts=n + 1, node_names=tuple(f"h{i}" for i in range(n + 1)),
                    link_src=np.array(src), link_dst=np.array(dst), bandwidth_Bps=np.array(bw, float),
                    latency_s=np.zeros(2 * n))


def test_parking_lot_is_the_textbook_max_min():
    # Long flow over links 1 and 2; one short flow on each link (Bertsekas & Gallager, 6.5.2).
    rates = max_min_rates(np.array([0, 0, 1, 2]), np.array([0, 1, 0, 1]), 3, np.array([1.0, 2.0]))
    assert rates.tolist() == pytest.approx([0.5, 0.5, 1.5])
    topo = _chain([1e9, 1e9, 1e9])
    g = TaskGraph()
    long_ = g.add_transfer(0, 3, 3e9)
    shorts = [g.add_transfer(i, i + 1, 1e9) for i in range(3)]
    t = run(g, topo)
    # All four share at 1/2 until the short ones end at 2 s; the long one then has 2 GB left at full rate.
    assert [t.finish_s[s] for s in shorts] == pytest.approx([2.0] * 3)
    assert t.finish_s[long_] == pytest.approx(4.0)


@pytest.mark.parametrize("bisection", ["1", "1/2", "1/4", "1/16"])
@pytest.mark.parametrize("engine", ["general", "levels"])
def test_ring_on_a_fat_tree_pays_the_longest_path_latency(bisection, engine):
    p, lat = 64, 0.2e-6
    topo = fat_tree(levels=2, hosts=p, hosts_per_leaf=16, bisection=Fraction(bisection), link_Bps=B, latency_s=lat)
    got = simulate("allreduce", "ring", topo, p, S, itemsize=4, engine=engine)
    longest = 4 * lat
    assert got.time_s == pytest.approx(2 * (p - 1) / p * S / B + 2 * (p - 1) * longest, rel=1e-12)
    assert got.exact


def test_the_same_input_gives_the_same_output_bit_for_bit():
    topo = fat_tree(levels=2, hosts=64, hosts_per_leaf=16, bisection=Fraction("1/4"), link_Bps=B, latency_s=1e-6)
    a = simulate("allreduce", "butterfly", topo, 64, S, engine="general")
    b = simulate("allreduce", "butterfly", topo, 64, S, engine="general")
    assert a.time_s == b.time_s and np.array_equal(a.rank_finish_s, b.rank_finish_s)
    assert np.array_equal(a.link_bytes, b.link_bytes)


def test_too_many_ranks_and_bad_placement_are_clear_errors():
    topo = _star(4)
    with pytest.raises(ValueError, match="5 ranks do not fit the 4 endpoints"):
        simulate("allreduce", "ring", topo, 5, S)
    with pytest.raises(ValueError, match="placement must give each of 4 ranks an endpoint"):
        simulate_schedule(build_schedule("allreduce", "ring", 4, 16), topo, np.array([0, 1, 2, 9]))

"""The array forms of the butterfly family, run by the level engine, against the general engine (the oracle)
at many host counts, powers of two and not, on 2- and 3-level trees; `auto` always gives the oracle's answer."""

from fractions import Fraction

import numpy as np
import pytest

from fabriclab.collectives import vectorized
from fabriclab.fabric import fat_tree, place
from fabriclab.sim.collective import simulate

S = 2**24
ALGOS = ["butterfly", "butterfly:order=far", "recursive-doubling", "ring", "ps"]


def _tree(hosts: int, levels: int, bisection: str):
    if levels == 3:
        return fat_tree(levels=3, hosts=hosts, hosts_per_leaf=4, leaves_per_pod=4, bisection=Fraction(bisection),
                        link_Bps=4e9, latency_s=0.2e-6)
    return fat_tree(levels=2, hosts=hosts, hosts_per_leaf=4, bisection=Fraction(bisection), link_Bps=4e9,
                    latency_s=0.2e-6)


@pytest.mark.parametrize("algo", ALGOS)
@pytest.mark.parametrize("ranks, hosts, levels, bisection", [
    (5, 8, 2, "1"), (12, 12, 2, "1/4"), (24, 24, 2, "1/2"), (48, 48, 2, "1/4"), (100, 100, 2, "1/4"),
    (128, 128, 2, "1/4"), (48, 48, 3, "1/4"), (64, 64, 3, "1/4"), (80, 80, 3, "1/2")])
def test_the_level_engine_gives_the_general_engines_answer(algo, ranks, hosts, levels, bisection):
    topo = _tree(hosts, levels, bisection)
    general = simulate("allreduce", algo, topo, ranks, S, engine="general")
    assert vectorized.rounds("allreduce", algo, ranks, S // 4) is not None
    fast = simulate("allreduce", algo, topo, ranks, S, engine="levels")
    if fast.exact:
        assert fast.time_s == pytest.approx(general.time_s, rel=1e-9, abs=0)
        assert np.allclose(fast.rank_finish_s, general.rank_finish_s, rtol=1e-9, atol=0)
        assert np.allclose(fast.link_bytes, general.link_bytes)
    else:  # lock-step rounds on a power of two are exact; folded ranks may overlap rounds
        assert ranks & (ranks - 1), f"{algo} on {ranks} ranks: the level engine could not prove its answer"
    auto = simulate("allreduce", algo, topo, ranks, S)
    assert auto.time_s == pytest.approx(general.time_s, rel=1e-9, abs=0)


@pytest.mark.parametrize("algo", ["butterfly", "butterfly:order=far", "recursive-doubling"])
def test_auto_keeps_the_oracles_answer_where_the_fast_path_cannot_prove_its_own(algo):
    topo = fat_tree(levels=2, hosts=96, hosts_per_leaf=4, bisection=Fraction(1, 4), link_Bps=4e9, latency_s=1e-6)
    where = place(96, topo, "random", seed=5)
    general = simulate("allreduce", algo, topo, 96, S, placement=where, engine="general")
    fast = simulate("allreduce", algo, topo, 96, S, placement=where, engine="levels")
    auto = simulate("allreduce", algo, topo, 96, S, placement=where)
    assert auto.time_s == pytest.approx(general.time_s, rel=1e-9, abs=0)
    assert auto.engine == ("levels" if fast.exact else "general")

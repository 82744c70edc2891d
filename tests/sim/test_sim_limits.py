"""What a simulation may ask of this machine is checked before any work; the lock-step fast path of the
level engine gives the general engine's answer, reduction costs included."""

from fractions import Fraction
import numpy as np
import pytest

from fabriclab.fabric import fat_tree, place, star
from fabriclab.sim.collective import simulate
from fabriclab.sim.limits import check_simulation


@pytest.mark.parametrize("kwargs, message", [
    (dict(size_bytes=0), "at least one element"), (dict(size_bytes=10), "whole number of 4-byte"),
    (dict(gamma_s_per_byte=-1.0), "gamma"), (dict(gamma_s_per_byte=float("nan")), "gamma"),
    (dict(gamma_s_per_byte=float("inf")), "gamma"), (dict(itemsize=0), "itemsize"),
    (dict(size_bytes=1 << 60), "at most 1PB"), (dict(num_ranks=0), "ranks 0"),
])
def test_bad_inputs_are_refused(kwargs, message):
    args = dict(num_ranks=4, size_bytes=1 << 20)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        simulate("allreduce", "ring", star(hosts=4), args.pop("num_ranks"), args.pop("size_bytes"), **args)


def test_large_simulations_are_refused_before_they_start():
    check_simulation("allreduce", "ring", 2048, 1 << 28)  # the papers' largest case goes through
    check_simulation("allreduce", "butterfly", 16384, 1 << 28)
    with pytest.raises(ValueError, match="message by message"):
        check_simulation("allreduce", "direct", 8192, 1 << 28)
    with pytest.raises(ValueError, match="at once"):
        check_simulation("allreduce", "ps:servers=P/2", 65536, 1 << 28)
    with pytest.raises(ValueError, match="ring on 16384 ranks sends 537 M"):
        check_simulation("allreduce", "ring", 65536, 1 << 30)


@pytest.mark.parametrize("placement", ["linear", "round-robin", "random"])
def test_lock_step_rounds_with_reduction_cost_equal_the_general_engine(placement):
    topo = fat_tree(hosts=80, hosts_per_leaf=16, bisection=Fraction("1/4"), link_Bps=4e9, latency_s=1e-6)
    where = place(80, topo, placement, seed=1)
    fast = simulate("allreduce", "ring", topo, 80, 2**26, placement=where, gamma_s_per_byte=3e-10, engine="levels")
    slow = simulate("allreduce", "ring", topo, 80, 2**26, placement=where, gamma_s_per_byte=3e-10, engine="general")
    assert np.allclose(fast.link_bytes, slow.link_bytes)
    if fast.exact:
        assert fast.time_s == pytest.approx(slow.time_s, rel=1e-9)
        assert np.allclose(fast.rank_finish_s, slow.rank_finish_s, rtol=1e-9)
    else:
        assert placement == "random"

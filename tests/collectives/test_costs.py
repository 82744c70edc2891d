"""Closed forms: the textbook cases, and consistency with the bytes each schedule moves."""

import math

import pytest

from fabriclab.collectives.costs import cost
from fabriclab.collectives.registry import COLLECTIVE_NAMES, build_schedule, verify_specs

S, B = 2**30, 4e9


@pytest.mark.parametrize("p", [2, 3, 8, 13, 64])
def test_ring_is_the_bandwidth_optimal_form(p):
    assert cost("allreduce", "ring", p, S, 0, 1 / B, 0) == pytest.approx(2 * (p - 1) / p * S / B)
    assert cost("allreduce", "ring", p, S, 1e-6, 0, 0) == pytest.approx(2 * (p - 1) * 1e-6)


@pytest.mark.parametrize("p", [2, 4, 16, 64])
def test_butterfly_power_of_two_matches_thakur_gropp(p):
    a, b, c = 1e-6, 1 / B, 1e-10
    want = 2 * math.log2(p) * a + 2 * (p - 1) / p * S * b + (p - 1) / p * S * c
    assert cost("allreduce", "butterfly", p, S, a, b, c) == pytest.approx(want)


@pytest.mark.parametrize("p, n", [(2, 1), (5, 4), (16, 8)])
def test_chain_is_s_caffe_cc(p, n):
    assert cost("reduce", f"chain:chunks={n}", p, S, 0, 1 / B, 0) == pytest.approx((n + p - 2) * S / (n * B))


def test_binomial_reduce_is_log_p_messages():
    assert cost("reduce", "binomial", 16, S, 0, 1 / B, 0) == pytest.approx(4 * S / B)


@pytest.mark.parametrize("collective", COLLECTIVE_NAMES)
def test_every_spec_has_a_cost_at_least_its_busiest_rank_bytes(collective):
    # No algorithm can beat the time the busiest rank needs to push its own bytes out.
    p, count = 12, 12 * 1000
    for spec in verify_specs(collective, p):
        s = build_schedule(collective, spec, p, count)
        busiest = max(s.elements_sent(r) for r in range(p))
        assert cost(collective, spec, p, count, 0, 1.0, 0) >= busiest * (1 - 1e-9), spec


def test_one_rank_costs_nothing():
    assert cost("allreduce", "ring", 1, S, 1e-6, 1 / B, 0) == 0.0

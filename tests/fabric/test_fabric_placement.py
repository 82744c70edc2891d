"""Placement policies and the too-many-ranks error."""

import numpy as np
import pytest

from fabriclab.fabric import fat_tree, place, star


def test_linear_fills_a_hosts_gpus_first():
    t = star(hosts=4, gpus_per_server=2)
    assert place(6, t).tolist() == [0, 1, 2, 3, 4, 5]
    assert [t.host_of(e) for e in place(6, t)] == [0, 0, 1, 1, 2, 2]


def test_round_robin_spreads_over_hosts():
    t = star(hosts=4, gpus_per_server=2)
    endpoints = place(8, t, "round-robin")
    assert [t.host_of(e) for e in endpoints] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert sorted(endpoints.tolist()) == list(range(8))


def test_random_is_seeded_and_distinct():
    t = fat_tree(hosts=64, bisection=1)
    a, b, c = place(40, t, "random", seed=3), place(40, t, "random", seed=3), place(40, t, "random", seed=4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert len(set(a.tolist())) == 40 and a.max() < 64


def test_too_many_ranks_says_what_to_change():
    with pytest.raises(ValueError, match=r"^schedule of 600 ranks does not fit 512 endpoints: "
                                         r"use --hosts >= 600 or fewer ranks$"):
        place(600, fat_tree(hosts=512, bisection=0.25))
    with pytest.raises(ValueError, match=r"use --hosts >= 3 or fewer ranks"):
        place(9, star(hosts=2, gpus_per_server=4))


def test_unknown_policy():
    with pytest.raises(ValueError, match="unknown placement 'block': use one of linear, round-robin, random"):
        place(2, star(hosts=2), "block")

"""`nccl/placement.py`: which servers each job gets (packed, interleaved, scattered), on which topology."""

from dataclasses import replace

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.nccl.links import cluster_topology
from fabriclab.nccl.placement import (cluster_servers, job_servers, leaves_spanned, place_jobs,
                                      placement_topology)


def _fat_tree():
    """dgx-h100 on a plain fat tree: 32-port leaves hold 4 servers of 8 NICs."""
    c = cluster_preset("dgx-h100")
    return replace(c, network=replace(c.network, fabric="fat-tree"))


def test_packed_jobs_take_the_first_servers_in_order():
    p = place_jobs(_fat_tree(), [64, 16, 4])
    assert p.servers == (tuple(range(8)), (8, 9), (10,)) and p.num_servers == 11


def test_interleaved_jobs_split_every_leaf():
    p = place_jobs(_fat_tree(), [32, 32], placement="interleaved")
    assert p.servers == ((0, 2, 4, 6), (1, 3, 5, 7))
    topo = placement_topology(_fat_tree(), p.num_servers)
    assert [leaves_spanned(topo, s) for s in p.servers] == [2, 2]
    assert place_jobs(_fat_tree(), [24, 8], placement="interleaved").servers == ((0, 2, 3), (1,))


def test_the_cluster_holds_the_jobs_over_the_free_share():
    c = _fat_tree()
    assert cluster_servers(c, 8, 0.5) == 16 and cluster_servers(c, 8, 0.3) == 12 and cluster_servers(c, 8) == 8
    assert place_jobs(c, [64], placement="scattered", busy=0.5).num_servers == 16
    assert job_servers(c, 4) == 1 and job_servers(c, 64) == 8


def test_scattered_spans_more_leaves_than_packed_and_never_shares_a_server():
    c = _fat_tree()
    packed = place_jobs(c, [64], busy=0.5)
    topo = placement_topology(c, packed.num_servers)
    assert leaves_spanned(topo, packed.servers[0]) == 2
    spans, topo24 = [], placement_topology(c, 24)
    for seed in range(10):
        p = place_jobs(c, [64, 32], placement="scattered", busy=0.5, seed=seed)
        a, b = map(set, p.servers)
        assert not a & b and len(a) == 8 and len(b) == 4 and max(a | b) < p.num_servers == 24
        assert list(p.servers[0]) == sorted(p.servers[0])
        spans.append(leaves_spanned(topo24, p.servers[0]))
    assert min(spans) >= 2 and sum(spans) / len(spans) > 2.5


def test_seeds_are_reproducible():
    c = _fat_tree()
    draws = [place_jobs(c, [64], placement="scattered", busy=0.5, seed=s).servers for s in (3, 3, 4)]
    assert draws[0] == draws[1] != draws[2]


def test_the_topology_is_the_one_links_simulates():
    c = _fat_tree()
    assert placement_topology(c, 8) is cluster_topology(c, 64)


@pytest.mark.parametrize("kwargs, words", [
    (dict(busy=1.0), "[0, 1)"), (dict(busy=-0.1), "[0, 1)"), (dict(num_servers=4), "4 free"),
    (dict(placement="random"), "packed, interleaved, scattered")])
def test_bad_placements_say_what_to_change(kwargs, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        place_jobs(_fat_tree(), [64], **kwargs)


def test_jobs_that_do_not_fill_servers_are_refused():
    with pytest.raises(ValueError, match="whole servers"):
        place_jobs(_fat_tree(), [60])

"""Fat trees: structure, capacities, bisection from the links, latencies, D-mod-K, and errors."""

from fractions import Fraction
import numpy as np
import pytest

from fabriclab.fabric import bisection_bandwidth_Bps, fat_tree, leaf_spine, star

B, LAT = 4e9, 0.2e-6


def _count(t, a, b):
    """Directed links from nodes named a* to nodes named b*, and their bandwidths."""
    names = np.array(t.node_names)
    src, dst = names[t.link_src], names[t.link_dst]
    mask = np.char.startswith(src.astype(str), a) & np.char.startswith(dst.astype(str), b)
    return int(mask.sum()), set(t.bandwidth_Bps[mask].tolist())


@pytest.mark.parametrize("ratio, spines", [(1, 16), ("1/2", 8), ("1/4", 4), ("1/8", 2), ("1/16", 1)])
def test_two_level_counts_and_capacities(ratio, spines):
    t = fat_tree(levels=2, hosts=512, hosts_per_leaf=16, bisection=Fraction(ratio), link_Bps=B, latency_s=LAT)
    names = t.node_names
    assert sum(n.startswith("leaf") for n in names) == 32
    assert sum(n.startswith("spine") for n in names) == spines
    assert _count(t, "h", "leaf") == (512, {B})
    assert _count(t, "leaf", "spine") == (32 * spines, {B})   # spines up-links per leaf
    assert _count(t, "spine", "leaf") == (32 * spines, {B})
    assert t.num_links == 2 * (512 + 32 * spines)
    assert set(t.latency_s.tolist()) == {LAT}


def test_the_poster_example_has_32_leaves_with_4_uplinks_each():
    t = fat_tree(levels=2, hosts=512, hosts_per_leaf=16, bisection=1 / 4)
    leaf0 = t.node_names.index("leaf0")
    ups = [l for l in range(t.num_links) if t.link_src[l] == leaf0 and t.node_names[t.link_dst[l]].startswith("spine")]
    assert len(ups) == 4
    assert t.name == "fat-tree(levels=2,hosts=512,hosts_per_leaf=16,bisection=1/4)"


def test_three_level_applies_the_ratio_at_the_aggregation_uplinks():
    t = fat_tree(levels=3, hosts=1024, hosts_per_leaf=16, bisection=Fraction("1/4"), link_Bps=B)
    names = t.node_names
    # 4 pods of 16 leaves; 16 aggregation switches per pod; 16 * 4 core switches of one port per pod.
    assert [sum(n.startswith(p) for n in names) for p in ("leaf", "agg", "core")] == [64, 64, 64]
    assert _count(t, "leaf", "agg")[0] == 64 * 16        # leaves are not oversubscribed: 16 up, 16 down
    assert _count(t, "agg", "core")[0] == 64 * 4         # 16 leaves per pod * 1/4 up-links per agg
    assert _count(t, "core", "agg")[0] == 64 * 4         # each core switch reaches each of the 4 pods once


@pytest.mark.parametrize("levels, hosts, ratio", [(2, 128, 1), (2, 128, "1/2"), (2, 128, "1/4"), (2, 128, "1/16"),
                                                 (3, 128, 1), (3, 128, "1/2"), (3, 128, "1/4")])
def test_bisection_from_the_links_is_ratio_times_full(levels, hosts, ratio):
    kwargs = dict(hosts_per_leaf=8, leaves_per_pod=4) if levels == 3 else dict(hosts_per_leaf=16)
    t = fat_tree(levels=levels, hosts=hosts, bisection=Fraction(ratio), link_Bps=B, **kwargs)
    full = hosts / 2 * B
    r = eval(str(ratio)) if isinstance(ratio, str) else ratio
    assert bisection_bandwidth_Bps(t) == pytest.approx(r * full)


def test_path_latencies_count_links():
    t2 = fat_tree(levels=2, hosts=64, hosts_per_leaf=16, bisection=1, latency_s=LAT)
    assert t2.path_latency_s(0, 15) == pytest.approx(2 * LAT)
    assert t2.path_latency_s(0, 16) == pytest.approx(4 * LAT)
    assert t2.path_latency_s(3, 3) == 0 and t2.route(3, 3) == ()
    t3 = fat_tree(levels=3, hosts=128, hosts_per_leaf=8, leaves_per_pod=4, bisection=1, latency_s=LAT)
    assert t3.path_latency_s(0, 7) == pytest.approx(2 * LAT)
    assert t3.path_latency_s(0, 8) == pytest.approx(4 * LAT)     # same pod
    assert t3.path_latency_s(0, 127) == pytest.approx(6 * LAT)   # across pods


@pytest.mark.parametrize("levels", [2, 3])
def test_dmodk_spreads_destinations_evenly_over_each_leafs_uplinks(levels):
    kwargs = dict(hosts_per_leaf=8, leaves_per_pod=4) if levels == 3 else dict(hosts_per_leaf=16)
    t = fat_tree(levels=levels, hosts=256, bisection=Fraction("1/4"), **kwargs)
    k = kwargs["hosts_per_leaf"]
    for leaf in (0, 5):
        src = np.full(256, leaf * k)
        dst = np.arange(256)
        dst = dst[dst // k != leaf]
        offsets, links = t.routes(src[:dst.size], dst)
        second_hop = links[offsets[:-1] + 1]                 # the leaf's up-link for each destination
        counts = np.unique(second_hop, return_counts=True)[1]
        assert counts.size == (k if levels == 3 else 4)
        assert counts.min() == counts.max()


def test_ecmp_is_seeded_and_uses_valid_uplinks():
    a = fat_tree(hosts=256, bisection=Fraction("1/2"), routing="ecmp", seed=1)
    b = fat_tree(hosts=256, bisection=Fraction("1/2"), routing="ecmp", seed=1)
    c = fat_tree(hosts=256, bisection=Fraction("1/2"), routing="ecmp", seed=2)
    src, dst = np.repeat(np.arange(256), 256), np.tile(np.arange(256), 256)
    ra, rb, rc = a.routes(src, dst), b.routes(src, dst), c.routes(src, dst)
    assert all(np.array_equal(x, y) for x, y in zip(ra, rb))
    assert not np.array_equal(ra[1], rc[1])
    assert np.array_equal(ra[0], rc[0])                      # same lengths, other spines


def test_leaf_spine_with_faster_uplinks_and_star():
    t = leaf_spine(hosts=64, hosts_per_leaf=16, spines=2, link="25GbE", uplink="100GbE")
    assert _count(t, "leaf", "spine") == (8, {12.5e9})
    assert bisection_bandwidth_Bps(t) == pytest.approx(0.5 * 32 * 3.125e9)
    s = star(hosts=8, link="EDR")
    assert s.num_links == 16 and s.path_latency_s(0, 7) == pytest.approx(2 * 0.09e-6)
    assert bisection_bandwidth_Bps(s) == pytest.approx(4 * 12.5e9)


def test_gpus_share_the_host_nic():
    t = fat_tree(hosts=32, hosts_per_leaf=16, bisection=1, gpus_per_server=4, nvlink="NVLink-V100")
    assert t.num_endpoints == 128 and t.host_of(5) == 1
    inside = [t.link_name(l) for l in t.route(4, 5)]
    assert inside == ["h1.gpu0->h1.nvsw", "h1.nvsw->h1.gpu1"]
    out_a, out_b = t.route(4, 100), t.route(5, 101)
    assert out_a[1] == out_b[1] and t.link_name(out_a[1]) == "h1.pcie->leaf0"
    p = fat_tree(hosts=32, hosts_per_leaf=16, bisection=1, gpus_per_server=2)
    assert [p.link_name(l) for l in p.route(0, 1)] == ["h0.gpu0->h0.pcie", "h0.pcie->h0.gpu1"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(hosts=512, hosts_per_leaf=16, bisection=Fraction("1/32")),
     r"gives 0.5 leaf up-links .*use bisection=1/16, or hosts_per_leaf=32"),
    (dict(hosts=512, hosts_per_leaf=12, bisection=Fraction("1/4")),
     r"512 hosts do not fill whole leaves of 12 hosts: use hosts=504 or 516, or hosts_per_leaf=8 or 16"),
    (dict(hosts=512, hosts_per_leaf=16, bisection=Fraction("3/20")),
     r"gives 2.4 leaf up-links .*use bisection=1/8 or bisection=3/16"),
    (dict(hosts=16, hosts_per_leaf=16, bisection=1), r"fill only one of the leaves of 16 hosts"),
    (dict(levels=3, hosts=256, hosts_per_leaf=16, bisection=Fraction("1/4")),
     r"pods \(16 leaves of 16\).*or leaves_per_pod=4 or 8"),
    (dict(levels=3, hosts=1024, hosts_per_leaf=16, bisection=Fraction("1/32")),
     r"leaves_per_pod=16 gives 0.5 aggregation up-links.*bisection=1/16, or leaves_per_pod=32"),
    (dict(levels=4, hosts=512), r"2 or 3 levels"),
    (dict(hosts=512, bisection=0), r"ratio in \(0, 1\]"),
    (dict(hosts=512, link_Bps=0), r"greater than zero"),
    (dict(hosts=512, routing="adaptive"), r"unknown routing 'adaptive': use one of dmodk, ecmp"),
])
def test_bad_fat_trees_say_what_to_change(kwargs, message):
    with pytest.raises(ValueError, match=message) as info:
        fat_tree(**kwargs)
    assert "\n" not in str(info.value)

"""Routes: connected paths, minimal length, batch == pair by pair, and naive oracles per topology."""

import itertools

import numpy as np
import pytest

from fabriclab.fabric import Topology, fat_tree, flattened_butterfly, leaf_spine, ring, star, torus

TOPOLOGIES = {
    "fat-tree-2": lambda: fat_tree(levels=2, hosts=64, hosts_per_leaf=8, bisection=0.5),
    "fat-tree-3": lambda: fat_tree(levels=3, hosts=64, hosts_per_leaf=4, leaves_per_pod=4, bisection=0.5),
    "fat-tree-ecmp": lambda: fat_tree(levels=3, hosts=32, hosts_per_leaf=4, leaves_per_pod=2, bisection=1,
                                      routing="ecmp", seed=7),
    "fat-tree-gpus": lambda: fat_tree(hosts=16, hosts_per_leaf=4, bisection=0.5, gpus_per_server=3),
    "leaf-spine": lambda: leaf_spine(hosts=24, hosts_per_leaf=6, spines=3),
    "star-nvlink": lambda: star(hosts=6, gpus_per_server=2, nvlink="NVLink-A100"),
    "ring-odd": lambda: ring(7),
    "ring-gpus": lambda: ring(6, gpus_per_server=2),
    "torus-2d": lambda: torus(dims=(4, 3)),
    "torus-3d": lambda: torus(dims=(2, 3, 4)),
    "flat-butterfly": lambda: flattened_butterfly(dims=(3, 4), hosts_per_router=2),
}


def _all_pairs(t):
    n = t.num_endpoints
    return np.repeat(np.arange(n), n), np.tile(np.arange(n), n)


def _hops(t):
    """Minimum hop counts between all endpoints by BFS on the links (an independent oracle)."""
    adjacency = {}
    for link in range(t.num_links):
        adjacency.setdefault(int(t.link_src[link]), []).append(int(t.link_dst[link]))
    dist = np.zeros((t.num_endpoints, t.num_endpoints), dtype=int)
    for s in range(t.num_endpoints):
        seen, frontier, d = {s: 0}, [s], 0
        while frontier:
            d += 1
            frontier = [v for u in frontier for v in adjacency.get(u, []) if v not in seen and not seen.update({v: d})]
        dist[s] = [seen[e] for e in range(t.num_endpoints)]
    return dist


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_every_route_is_a_connected_minimal_path(name):
    t = TOPOLOGIES[name]()
    src, dst = _all_pairs(t)
    offsets, links = t.routes(src, dst)
    hops = _hops(t)
    for i, (s, d) in enumerate(zip(src, dst)):
        route = links[offsets[i]:offsets[i + 1]]
        if s == d:
            assert route.size == 0
            continue
        nodes = [t.link_src[route[0]], *t.link_dst[route]]
        assert nodes[0] == s and nodes[-1] == d
        assert np.array_equal(t.link_src[route[1:]], t.link_dst[route[:-1]])
        assert len(set(nodes)) == len(nodes), f"{name}: route {s}->{d} revisits a node"
        assert route.size == hops[s, d], f"{name}: route {s}->{d} is not minimal"


@pytest.mark.parametrize("name", TOPOLOGIES)
def test_batched_routes_equal_pair_by_pair_routes(name):
    t = TOPOLOGIES[name]()
    rng = np.random.default_rng(1)
    src = rng.integers(0, t.num_endpoints, 300)
    dst = rng.integers(0, t.num_endpoints, 300)
    offsets, links = t.routes(src, dst)
    for i in range(src.size):
        fresh = TOPOLOGIES[name]().route(int(src[i]), int(dst[i])) if i < 5 else t.route(int(src[i]), int(dst[i]))
        assert tuple(links[offsets[i]:offsets[i + 1]].tolist()) == fresh


def test_two_level_dmodk_matches_a_naive_router():
    k, u, t = 8, 4, fat_tree(levels=2, hosts=64, hosts_per_leaf=8, bisection=0.5)
    for s, d in itertools.product(range(0, 64, 3), range(64)):
        if s // k == d // k:
            want = [] if s == d else [f"h{s}->leaf{s // k}", f"leaf{d // k}->h{d}"]
        else:
            want = [f"h{s}->leaf{s // k}", f"leaf{s // k}->spine{d % u}", f"spine{d % u}->leaf{d // k}",
                    f"leaf{d // k}->h{d}"]
        assert [t.link_name(l) for l in t.route(s, d)] == want


def test_three_level_dmodk_matches_a_naive_router():
    k, p, w3 = 4, 4, 2       # 4 hosts per leaf, 4 leaves per pod, bisection 1/2: 2 core up-links per agg
    t = fat_tree(levels=3, hosts=64, hosts_per_leaf=k, leaves_per_pod=p, bisection=0.5)
    for s, d in itertools.product(range(0, 64, 5), range(64)):
        if s // (k * p) == d // (k * p):
            continue
        agg, core = d % k, d % k + k * ((d // k) % w3)
        pod_s, pod_d = s // (k * p), d // (k * p)
        want = [f"h{s}->leaf{s // k}", f"leaf{s // k}->agg{pod_s * k + agg}", f"agg{pod_s * k + agg}->core{core}",
                f"core{core}->agg{pod_d * k + agg}", f"agg{pod_d * k + agg}->leaf{d // k}", f"leaf{d // k}->h{d}"]
        assert [t.link_name(l) for l in t.route(s, d)] == want


def test_torus_routes_in_dimension_order_the_short_way():
    t = torus(dims=(4, 4))
    assert [t.link_name(l) for l in t.route(0, 10)] == ["h0->h1", "h1->h2", "h2->h6", "h6->h10"]
    assert [t.link_name(l) for l in t.route(0, 15)] == ["h0->h3", "h3->h15"]
    r = ring(5)
    assert [r.link_name(l) for l in r.route(0, 3)] == ["h0->h4", "h4->h3"]
    assert t.num_links == 2 * 2 * 16
    assert torus(dims=(2, 2)).num_links == 2 * 4       # size-2 dimensions get one cable, not two


def test_a_hand_built_topology_routes_by_shortest_path():
    # 0 - 2 - 1 and a longer detour 0 - 3 - 4 - 1; endpoints 0, 1.
    ends = [(0, 2), (2, 1), (0, 3), (3, 4), (4, 1)]
    src = [a for a, b in ends] + [b for a, b in ends]
    dst = [b for a, b in ends] + [a for a, b in ends]
    t = Topology(name="hand", num_hosts=2, node_names=("a", "b", "s", "x", "y"), link_src=src, link_dst=dst,
                 bandwidth_Bps=[1e9] * 10, latency_s=[1e-6] * 10)
    assert [t.link_name(l) for l in t.route(0, 1)] == ["a->s", "s->b"]
    assert t.path_latency_s(1, 0) == pytest.approx(2e-6)


def test_bad_inputs_to_a_topology():
    with pytest.raises(ValueError, match=r"link a->b of 'hand' has bandwidth 0.0 B/s: give every link"):
        Topology(name="hand", num_hosts=2, node_names=("a", "b"), link_src=[0, 1], link_dst=[1, 0],
                 bandwidth_Bps=[0.0, 1.0], latency_s=[0.0, 0.0])
    t = star(hosts=4)
    with pytest.raises(ValueError, match=r"destination endpoint 4 is not in 'star\(hosts=4\)': endpoints are 0..3"):
        t.routes(np.array([0]), np.array([4]))

"""`TopologySpec`: numbers only, checked before anything is built, shaped from hosts, and read back."""

from fractions import Fraction

import pytest

from fabriclab.fabric.scenario import (
    MAX_ENDPOINTS,
    TopologySpec,
    auto_hosts_per_leaf,
    build_topology,
)


def test_the_record_form_reads_back_to_the_same_spec():
    spec = TopologySpec(kind="fat-tree", hosts=64, hosts_per_leaf=16, bisection=Fraction(1, 4), link="EDR",
                        bandwidth_Bps=12.5e9, latency_s=9e-8, routing="ecmp", seed=3)
    data = spec.as_dict()
    assert data["bisection"] == "1/4" and data["bandwidth_Bps"] == 12.5e9
    assert TopologySpec.from_dict(data) == spec
    with pytest.raises(ValueError, match="unknown fields"):
        TopologySpec.from_dict({**data, "bandwidth": "4GB/s"})


def test_unit_strings_do_not_reach_the_fabric():
    with pytest.raises(TypeError, match="parse"):
        TopologySpec(bisection="1/4")
    with pytest.raises(TypeError, match="parse"):
        TopologySpec(bandwidth_Bps="4GB/s")


@pytest.mark.parametrize("kwargs, message", [
    (dict(hosts=0), "hosts 0"), (dict(bandwidth_Bps=float("nan")), "bandwidth nan"),
    (dict(latency_s=-1e-6), "latency"), (dict(bisection=Fraction(3, 2)), "bisection"),
    (dict(kind="torus", dims=(0, 4)), "dims"), (dict(kind="mesh"), "unknown topology"),
    (dict(routing="ospf"), "routing 'ospf'"), (dict(hosts=MAX_ENDPOINTS + 1), "at most"),
    (dict(kind="flattened-butterfly", dims=(100_000,)), "at most"),
])
def test_bad_values_are_refused_before_building(kwargs, message):
    with pytest.raises(ValueError, match=message):
        TopologySpec(**kwargs)


def test_torus_and_butterfly_are_shaped_from_the_hosts():
    assert build_topology(TopologySpec(kind="torus", hosts=12)).name == "torus(dims=3x4)"
    assert build_topology(TopologySpec(kind="torus", hosts=7)).name == "ring(hosts=7)"
    spec = TopologySpec(kind="torus", dims=(2, 3))
    assert spec.hosts == 6 and build_topology(spec).num_hosts == 6
    assert TopologySpec(kind="flattened-butterfly", hosts=64).shape == (4, 4)
    assert TopologySpec(kind="flattened-butterfly", hosts=16).shape == (4,)
    with pytest.raises(ValueError, match="k\\^2 or k\\^3"):
        TopologySpec(kind="flattened-butterfly", hosts=10)


def test_the_default_leaf_size():
    assert auto_hosts_per_leaf(2048, Fraction(1, 4)) == 16  # the papers' leaves
    assert auto_hosts_per_leaf(8) == 4 and auto_hosts_per_leaf(4, Fraction(1, 2)) == 2
    assert auto_hosts_per_leaf(40) == 10 and auto_hosts_per_leaf(256, Fraction(1), levels=3) == 8
    assert auto_hosts_per_leaf(12, Fraction(1, 4)) == 4  # 6 hosts per leaf would give 1.5 up-links
    for hosts in (2, 3, 8, 24, 96, 2048):
        build_topology(TopologySpec(hosts=hosts, hosts_per_leaf=auto_hosts_per_leaf(hosts)))

"""The topology options parse once, at the edge, into a `TopologySpec` of numbers; the option group builds it."""

from fractions import Fraction

import pytest

from fabriclab.cli.options import TOPOLOGY, load_cluster_option, topology_spec_from
from fabriclab.fabric.scenario import build_topology


def test_options_parse_once_into_numbers():
    spec = topology_spec_from(topology="fat-tree", hosts="2048", bisection="1/4", link="4GB/s", latency="0.2us")
    assert (spec.hosts_per_leaf, spec.bisection, spec.bandwidth_Bps, spec.latency_s) == (16, Fraction(1, 4), 4e9,
                                                                                      pytest.approx(2e-7))
    preset = topology_spec_from(link="25GbE")
    assert (preset.link, preset.bandwidth_Bps, preset.latency_s) == ("25GbE", 25e9 / 8, pytest.approx(3e-7))
    assert topology_spec_from(link="EDR", latency="1us").latency_s == pytest.approx(1e-6)
    with pytest.raises(ValueError, match="disagree"):
        topology_spec_from(topology="torus", hosts="16", dims="2x3")
    with pytest.raises(ValueError, match="only fat-tree and leaf-spine"):
        topology_spec_from(topology="star", routing="ecmp")


def test_the_default_leaf_size_builds_from_the_options():
    for hosts in (2, 3, 8, 24, 96, 2048):
        build_topology(topology_spec_from(hosts=str(hosts)))


def test_the_option_group_builds_from_a_command_s_locals():
    values = {"topology": "fat-tree", "hosts": "64", "bisection": "1/2", "link": "25GbE", "algo": "ring"}
    spec = TOPOLOGY.build(values)
    assert (spec.hosts, spec.bisection, spec.link) == (64, Fraction(1, 2), "25GbE")
    assert TOPOLOGY.build(values, hosts="128").hosts == 128  # an override wins


def test_cluster_option_takes_a_preset_or_a_file(tmp_path):
    from fabriclab.fabric.cluster import save_cluster

    h100 = load_cluster_option("DGX-H100")
    assert h100.server.gpus_per_server == 8 and h100.server.nic_bandwidth_Bps == 50e9
    save_cluster(h100, tmp_path / "c.json")
    assert load_cluster_option(str(tmp_path / "c.json")) == h100
    with pytest.raises(ValueError, match="no such file and no preset"):
        load_cluster_option(str(tmp_path / "missing.json"))

"""SimGrid export: the XML parses, FAT_TREE parameters match the tree, small others go Full."""

from fractions import Fraction
import xml.etree.ElementTree as ET

import pytest

from fabriclab.fabric import fat_tree, ring, star
from fabriclab.fabric.simgrid import fat_tree_parameters, simgrid_hostfile, to_simgrid_xml, write_simgrid


@pytest.mark.parametrize("kwargs, params", [
    (dict(levels=2, hosts=512, hosts_per_leaf=16, bisection=Fraction("1/4")), "2;16,32;1,4;1,1"),
    (dict(levels=2, hosts=2048, hosts_per_leaf=16, bisection=1), "2;16,128;1,16;1,1"),
    (dict(levels=3, hosts=1024, hosts_per_leaf=16, bisection=Fraction("1/16")), "3;16,16,4;1,16,1;1,1,1"),
])
def test_fat_tree_becomes_a_simgrid_fat_tree_cluster(kwargs, params):
    t = fat_tree(link_Bps=4e9, latency_s=0.2e-6, **kwargs)
    root = ET.fromstring(to_simgrid_xml(t))
    assert root.tag == "platform" and root.get("version") == "4.1"
    (cluster,) = root.iter("cluster")
    assert cluster.get("topology") == "FAT_TREE"
    assert cluster.get("topo_parameters") == params == fat_tree_parameters(t)
    assert cluster.get("radical") == f"0-{t.num_hosts - 1}" and cluster.get("prefix") == "h"
    assert (cluster.get("bw"), cluster.get("lat")) == ("4000000000Bps", "200ns")
    # The parameters describe this tree: hosts = product of down-links; switches per level.
    levels, down, up, _ = params.split(";")
    down, up = [int(x) for x in down.split(",")], [int(x) for x in up.split(",")]
    hosts = 1
    for m in down:
        hosts *= m
    assert hosts == t.num_hosts
    assert sum(n.startswith("leaf") for n in t.node_names) == t.num_hosts // down[0]
    top = 1
    for w in up:
        top *= w
    assert sum(n.startswith("spine" if int(levels) == 2 else "core") for n in t.node_names) == top


def test_star_becomes_a_flat_cluster():
    (cluster,) = ET.fromstring(to_simgrid_xml(star(hosts=8, link="EDR"))).iter("cluster")
    assert cluster.get("topology") is None and cluster.get("bw") == "12500000000Bps"


def test_others_become_a_full_zone_with_our_routes():
    t = ring(5, gpus_per_server=2)
    root = ET.fromstring(to_simgrid_xml(t))
    zone = root.find("zone")
    assert zone.get("routing") == "Full"
    assert len(zone.findall("host")) == 10 and len(zone.findall("link")) == t.num_links
    routes = zone.findall("route")
    assert len(routes) == 10 * 9
    first = routes[0]
    assert (first.get("src"), first.get("dst")) == ("h0.gpu0", "h0.gpu1")
    assert len(first.findall("link_ctn")) == len(t.route(0, 1))
    assert simgrid_hostfile(t).split() == list(t.node_names[:10])


def test_ecmp_trees_are_exported_with_explicit_routes_when_small():
    t = fat_tree(hosts=32, hosts_per_leaf=8, bisection=Fraction("1/2"), routing="ecmp")
    assert ET.fromstring(to_simgrid_xml(t)).find("zone/cluster") is None


def test_big_non_cluster_topologies_are_refused():
    with pytest.raises(ValueError, match=r"needs 4192256 explicit routes .* at most 316 endpoints"):
        to_simgrid_xml(ring(2048))


def test_write_platform_and_hostfile(tmp_path):
    t = fat_tree(hosts=64, bisection=Fraction("1/4"))
    path = write_simgrid(t, tmp_path / "ft.xml", hostfile=tmp_path / "hosts.txt")
    assert ET.parse(path).getroot().find("zone/cluster").get("topo_parameters") == "2;16,4;1,4;1,1"
    assert (tmp_path / "hosts.txt").read_text().split()[:2] == ["h0", "h1"]

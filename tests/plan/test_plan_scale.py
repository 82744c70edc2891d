"""The plan at today's scale: NCCL's choice by default, radix-true trees and their bill, NICs per server and
rails, the schedule-size refusal, progress lines, compute labels and the server price of the same GPU."""

import json
from fractions import Fraction

import numpy as np
import pytest

from fabriclab.fabric.cluster import a100_hdr_prior, swap_nic
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.switches import default_radix, max_hosts, tree_for
from fabriclab.plan.bill import count_network
from fabriclab.plan.compute import compute_label, plan_profile, price_note
from fabriclab.plan.library_choice import ChoiceCost, grid_cluster
from fabriclab.plan.prices import DEFAULT_PRICES, load_prices, parse_prices
from fabriclab.plan.search import NodeSpec, PlanSpec, run_plan
from fabriclab.plan.shape import build_network, check_schedule_size, option_tree, rail_placement
from fabriclab.workload.profile import load_profile


def _spec(**kw):
    base = dict(profiles=(load_profile("resnet50"),), gpus=(128,), fabrics=("100gbe",),
                bisections=(Fraction(1),), prices=load_prices())
    base.update(kw)
    return PlanSpec(**base)


# ---- radix ----------------------------------------------------------------------------------------

def test_the_radix_forces_the_levels():
    assert default_radix("400g-ndr") == 64 and default_radix("800g-xdr") == 144 and default_radix("hdr") == 40
    assert tree_for(64, 64, 1).levels == 1
    two = tree_for(2048, 64, 1)  # 64 leaves of 32 down / 32 up: R^2/2 non-blocking
    assert (two.levels, two.hosts_per_leaf) == (2, 32)
    three = tree_for(4096, 64, 1)  # 4096 NICs need a third level
    assert (three.levels, three.hosts_per_leaf, three.leaves_per_pod) == (3, 32, 32)
    assert max_hosts(2, 64, Fraction(1)) == 2048 and max_hosts(3, 64, Fraction(1)) == 65536
    assert max_hosts(2, 64, Fraction(1, 3)) == 64 * 48
    with pytest.raises(ValueError, match="4 levels"):
        tree_for(65537 * 2, 64, 1)
    with pytest.raises(ValueError, match="at most 2,048.*3 levels"):
        tree_for(4096, 64, 1, levels=2)


def test_a_radix_true_bill_counts_whole_switches():
    # 16,384 NICs on 64-port switches: 512 leaves, 16 pods of 32 aggregation switches, 256 cores of 64 ports.
    tree = tree_for(16384, 64, 1)
    shape = build_network(NodeSpec(gpus_per_server=1), "NDR", 16384, tree, Fraction(1)).router.shape
    bill = count_network(shape, radix=64)
    assert bill.num_nics == 16384 and bill.num_switches == 512 + 512 + 256
    assert bill.num_ports_bought == 1280 * 64
    # 128 NICs at 32 per leaf: 4 leaves and the 128 up-links on 2 spines, not 32 spines of 4 ports.
    small = count_network(build_network(NodeSpec(gpus_per_server=1), "NDR", 128, tree_for(128, 64, 1),
                                        Fraction(1)).router.shape, radix=64)
    assert small.num_switches == 4 + 2 and small.num_ports_bought == 6 * 64
    prices = load_prices().fabric("NDR")
    assert small.cost_usd(prices) == pytest.approx(128 * (prices.nic.usd + prices.host_cable.usd)
                                                   + 384 * prices.switch_port.usd + 128 * prices.switch_cable.usd)


def test_uneven_gpu_counts_suggest_real_plan_options():
    with pytest.raises(ValueError) as err:
        option_tree(NodeSpec(), "100gbe", 100, Fraction(1, 4), None, None, None)
    text = str(err.value)
    assert "--gpus 96 or 104" in text and "--bisection 1 or 1/2" in text and "hosts=" not in text
    for gpus in (96, 104):
        option_tree(NodeSpec(), "100gbe", gpus, Fraction(1, 4), None, None, None)


def test_hosts_per_leaf_beyond_the_radix_is_refused():
    with pytest.raises(ValueError, match="more than the radix 32"):
        option_tree(NodeSpec(), "100gbe", 256, Fraction(1), None, None, 20)


# ---- NCCL's choice --------------------------------------------------------------------------------

def test_nccl_picks_trees_at_scale_and_rings_on_two_servers():
    cluster = grid_cluster(gpus_per_server=8, nics_per_server=1, fabric="NDR", pcie="PCIe3x16", nvlink=None)
    calls = []
    big = ChoiceCost(cluster=cluster, num_ranks=16384, simulate=lambda a: calls.append(a) or (lambda s: 1.0))
    assert big.pick(64 << 20)[0] == "tree" and big(64 << 20) == 1.0 and calls == ["double-binary-tree"]
    small = ChoiceCost(cluster=cluster, num_ranks=16, simulate=lambda a: calls.append(a) or (lambda s: 2.0))
    assert small.pick(256 << 20)[0] == "ring" and small(256 << 20) == 2.0 and calls[-1] == "ring"
    assert small(0) == 0.0 and "ring/Simple x 1" in small.describe()


def test_the_default_plan_is_nccls_choice_and_beats_the_ring_where_nccl_runs_trees():
    spec = _spec(gpus=(256,), node=NodeSpec(gpus_per_server=8), fabrics=("400g-ndr",))
    default, = run_plan(spec).rows
    ring, = run_plan(_spec(gpus=(256,), node=NodeSpec(gpus_per_server=8), fabrics=("400g-ndr",),
                           algos=("ring",))).rows
    assert default["algo"] == "nccl" and "tree" in default["library_choice"]
    assert default["scaling_factor"] > ring["scaling_factor"]


# ---- NICs per server, rails ------------------------------------------------------------------------

def test_nics_per_server_are_hosts_of_the_tree_and_rails_place_servers_across_them():
    node = NodeSpec(gpus_per_server=8, nics_per_server=8)
    # butterfly: every GPU sends across the network at once, so 8 NICs carry 8 times what one does
    one, = run_plan(_spec(gpus=(64,), node=NodeSpec(gpus_per_server=8), algos=("butterfly",))).rows
    eight, = run_plan(_spec(gpus=(64,), node=node, algos=("butterfly",))).rows
    assert (one["num_nics"], eight["num_nics"]) == (8, 64)
    assert eight["scaling_factor"] > one["scaling_factor"] and eight["network_usd"] > one["network_usd"]
    rails = rail_placement(16, NodeSpec(gpus_per_server=8, nics_per_server=2, rails=True))
    assert sorted(rails) == list(range(16))
    # server 0's GPUs 0-3 on rail 0 (host 0), 4-7 on rail 1 (host 2); server 1 on hosts 1 and 3
    assert list(rails[:8] // 4) == [0, 0, 0, 0, 2, 2, 2, 2] and list(rails[8:] // 4) == [1, 1, 1, 1, 3, 3, 3, 3]
    railed, = run_plan(_spec(gpus=(64,), node=NodeSpec(gpus_per_server=8, nics_per_server=8, rails=True),
                             algos=("ring",))).rows
    assert railed["rails"] and railed["num_nics"] == 64
    with pytest.raises(ValueError, match="--rails needs --nics-per-server > 1"):
        run_plan(_spec(gpus=(64,), node=NodeSpec(gpus_per_server=8, rails=True)))
    with pytest.raises(ValueError, match="divides --gpus-per-server 8"):
        run_plan(_spec(gpus=(64,), node=NodeSpec(gpus_per_server=8, nics_per_server=3)))


# ---- refusals and progress -------------------------------------------------------------------------

def test_a_schedule_too_large_to_simulate_is_refused_up_front():
    with pytest.raises(ValueError, match="million messages.*nccl"):
        check_schedule_size("hierarchical:lower=ring:upper=ring:group=8", 16384)
    check_schedule_size("double-binary-tree", 16384)
    check_schedule_size("ring", 16384)
    check_schedule_size("hierarchical:lower=ring:upper=ring:group=8", 1024)


# ---- compute and prices -----------------------------------------------------------------------------

def test_zoo_models_plan_from_flops_and_every_row_says_where_compute_comes_from():
    bert = plan_profile("bert_base")
    assert bert.model == "bert_base" and bert.grads and "FLOP rate" in compute_label(bert)
    assert compute_label(load_profile("resnet50")).startswith("measured profile of V100")


def test_server_prices_apply_only_to_the_same_gpu():
    shipped = load_prices()
    assert "H100" in price_note([load_profile("resnet50")], shipped)
    row, = run_plan(_spec()).rows
    assert row["servers_usd"] is None and row["network_share"] is None
    data = json.loads(DEFAULT_PRICES.read_text())
    data["gpu_server_per_gpu"] = {"usd": 10000, "gpu": "V100"}
    v100 = parse_prices(data)
    assert price_note([load_profile("resnet50")], v100) is None
    row, = run_plan(_spec(prices=v100)).rows
    assert row["servers_usd"] == 128 * 10000


def test_400gbe_and_800g_fabrics_are_priced():
    table = load_prices()
    for name in ("400gbe", "800gbe", "800g-xdr"):
        prices = table.fabric(name)
        assert prices.nic.usd > 0 and prices.nic.source


# ---- NIC swap ----------------------------------------------------------------------------------------

def test_a_nic_swap_keeps_the_servers_and_says_what_was_swapped():
    hdr = a100_hdr_prior()
    ndr = swap_nic(hdr, link_preset("NDR"))
    assert ndr.server.nic_bandwidth_Bps == 2 * hdr.server.nic_bandwidth_Bps
    assert ndr.server.gpus_per_server == hdr.server.gpus_per_server and ndr.network == hdr.network
    assert "NDR" in ndr.description and "instead of" in ndr.description and ndr.name == "a100-hdr+NDR"
    assert "PCIe" in ndr.description  # a 400G NIC behind PCIe 4.0 x16 (31.5 GB/s) is PCIe-bound
    assert np.isclose(ndr.server.nic_efficiency, hdr.server.nic_efficiency)


def test_an_engine_that_could_not_vouch_once_is_skipped_with_the_same_costs():
    from fabriclab.fabric import fat_tree
    from fabriclab.fabric.placement import place
    from fabriclab.plan.affine import CollectiveCosts

    trees = [fat_tree(hosts=32, hosts_per_leaf=8, bisection=Fraction(r), link="100GbE", gpus_per_server=2)
             for r in ("1", "1/4")]
    costs = CollectiveCosts()
    costs.cost(trees[0], "double-binary-tree", 64, place(64, trees[0]))
    # levels, then the general engine at the first size; the general engine alone at the second
    assert costs.num_simulations == 3 and ("double-binary-tree", 64) in costs._levels_inexact
    second = costs.cost(trees[1], "double-binary-tree", 64, place(64, trees[1]))
    assert costs.num_simulations == 5
    fresh = CollectiveCosts().cost(trees[1], "double-binary-tree", 64, place(64, trees[1]))
    assert (second.intercept_s, second.slope_s_per_byte) == (fresh.intercept_s, fresh.slope_s_per_byte)


def test_a_cluster_plan_bills_the_levels_its_radix_forces():
    from fabriclab.fabric.presets import cluster_preset
    from fabriclab.plan.cluster import cluster_bill

    h100 = cluster_preset("dgx-h100")  # 8 x NDR per server on rails, leaves of 32 down / 32 up, 64-port switches
    bill, levels = cluster_bill(h100, 256)  # 2,048 NICs: 8 rails x 8 leaves = 64 leaves, 2,048 up-links
    assert (levels, bill.num_switches, bill.radix) == (2, 64 + 32, 64)
    bill, levels = cluster_bill(h100, 2048)  # 16,384 NICs: 512 leaves > 64, so aggregation and core
    assert (levels, bill.num_switches) == (3, 512 + 512 + 256)
    assert bill.num_ports_bought == 1280 * 64 and bill.num_switch_cables == 2 * 512 * 32
    one, levels = cluster_bill(h100, 1)
    assert levels == 2 and one.num_nics == 8  # one server's 8 NICs sit on 8 rails' leaves


def test_nccls_tree_between_nics_adds_the_chain_through_the_gpus_behind_each():
    from fabriclab.plan.affine import AffineCost
    from fabriclab.plan.library_choice import node_tree_cost

    tree = AffineCost(intercept_s=1e-4, slope_s_per_byte=1e-10, num_ranks=16)
    assert node_tree_cost(tree, 1, 1e9) is tree
    slow_chain = node_tree_cost(tree, 8, 5e9)  # the chain's 0.2 ns/B is slower than the tree's 0.1 ns/B
    assert slow_chain.num_ranks == 128 and slow_chain(1e6) == pytest.approx(1e-4 + 1e6 / 5e9)
    assert node_tree_cost(tree, 8, 50e9)(1e6) == pytest.approx(tree(1e6))

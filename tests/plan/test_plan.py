"""`whatif.plan`: counting a tree's parts by hand, prices, Pareto, recommendations, the shared simulator
runs, and plan == what-if on the same point."""

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from fabriclab.fabric import fat_tree, star
from fabriclab.fabric.links import link_preset
from fabriclab.fabric.placement import place
from fabriclab.plan.prices import ITEMS, load_prices, parse_prices
from fabriclab.sim.collective import simulate
from fabriclab.whatif.bucket_time import CostModel
from fabriclab.whatif.fusion import FusionPolicy
from fabriclab.whatif.iteration import simulate_iteration
from fabriclab.plan.search import (V100_GAMMA_S_PER_BYTE, NodeSpec, PlanSpec, mark_pareto, check_bisection,
                                   recommend, run_plan)
from fabriclab.plan.bill import count_network
from fabriclab.plan.affine import CollectiveCosts
from fabriclab.workload.profile import load_profile

HAND_PRICES = parse_prices({"fabrics": {"100GbE": {"nic": 100, "switch_port": 10, "host_cable": 1,
                                                   "switch_cable": 1000}}})


# ---- counting ------------------------------------------------------------------------------------

def test_two_level_tree_counted_by_hand():
    # 8 servers, 4 per leaf, bisection 1/2: 2 leaves with 4 down and 2 up, 2 spines with 2 ports each.
    topo = fat_tree(levels=2, hosts=8, hosts_per_leaf=4, bisection=0.5, link="100GbE")
    bill = count_network(topo.router.shape)
    assert (bill.num_nics, bill.num_host_cables, bill.num_switch_cables) == (8, 8, 4)
    assert bill.num_switches == 4
    assert bill.num_switch_ports == 2 * (4 + 2) + 2 * 2  # leaves + spines = 16
    # Every full-duplex cable of the built topology is counted once (one GPU per server: no PCIe links).
    assert bill.num_host_cables + bill.num_switch_cables == topo.num_links // 2
    assert bill.cost_usd(HAND_PRICES.fabric("100gbe")) == 8 * 100 + 16 * 10 + 8 * 1 + 4 * 1000


def test_full_bisection_and_three_levels_by_hand():
    full = count_network(fat_tree(levels=2, hosts=8, hosts_per_leaf=4, bisection=1).router.shape)
    assert (full.num_switch_cables, full.num_switch_ports, full.num_switches) == (8, 24, 6)
    # 32 servers, 4 per leaf, 2 leaves per pod, bisection 1/2 at the aggregation switches:
    # 8 leaves (4 down, 4 up), 16 aggregation switches (2 down, 1 up), 4 cores (4 pods each).
    three = count_network(fat_tree(levels=3, hosts=32, hosts_per_leaf=4, leaves_per_pod=2,
                                   bisection=0.5).router.shape)
    assert (three.num_host_cables, three.num_switch_cables) == (32, 32 + 16)
    assert three.num_switch_ports == 8 * 8 + 16 * 3 + 4 * 4
    assert three.num_switches == 8 + 16 + 4
    one = count_network(star(hosts=4).router.shape)
    assert (one.num_switch_ports, one.num_switch_cables, one.num_switches) == (4, 0, 1)


def test_reducing_the_bisection_removes_uplinks_cables_and_spine_ports():
    bills = [count_network(fat_tree(hosts=256, bisection=r).router.shape) for r in (1, 0.25, 0.0625)]
    assert [b.num_switch_cables for b in bills] == [256, 64, 16]
    assert [b.num_switch_ports for b in bills] == [256 + 2 * 256, 256 + 2 * 64, 256 + 2 * 16]
    assert len({b.num_nics for b in bills}) == 1


# ---- prices --------------------------------------------------------------------------------------

def test_shipped_prices_are_labelled_sourced_and_dated():
    table = load_prices()
    assert table.label == "illustrative" and "illustrative" in table.describe()
    for fabric in ("25gbe", "100g-opa", "100gbe", "200g-hdr", "400g-ndr"):
        prices = table.fabric(fabric)
        for item in ITEMS:
            price = getattr(prices, item)
            assert price.usd > 0 and price.source and price.date[:2] == "20"
    assert table.gpu_server_per_gpu is not None and table.gpu_server_per_gpu.source


def test_speed_first_fabric_names_are_the_presets():
    assert [link_preset(n).name for n in ("100g-opa", "200g-hdr", "400g-ndr", "25gbe")] == \
        ["OPA100", "HDR", "NDR", "25GbE"]


@pytest.mark.parametrize("text, fragment", [
    ("", "is empty"),
    ("{}", "non-empty \"fabrics\""),
    ('{"fabrics": {"100GbE": {"nic": -5, "switch_port": 1, "host_cable": 1, "switch_cable": 1}}}', ">= 0"),
    ('{"fabrics": {"100GbE": {"nic": NaN, "switch_port": 1, "host_cable": 1, "switch_cable": 1}}}', "finite"),
    ('{"fabrics": {"100GbE": {"nic": "cheap", "switch_port": 1, "host_cable": 1, "switch_cable": 1}}}',
     "give a number"),
    ('{"fabrics": {"100GbE": {"nic": 1, "switch_port": 1}}}', "host_cable, switch_cable"),
    ('{"fabrics": {"warp-drive": {"nic": 1}}}', "unknown link preset"),
    ('{"fabrics": {"100GbE": {"nic": 1, "switch_port": 1, "host_cable": 1, "switch_cable": 1}}, '
     '"gpu_server_per_gpu": {"usd": Infinity}}', "gpu_server_per_gpu"),
    ("not json", "not JSON"),
])
def test_bad_price_files_say_what_to_change(tmp_path, text, fragment):
    path = tmp_path / "prices.json"
    path.write_text(text)
    with pytest.raises(ValueError, match="prices.json") as err:
        load_prices(path)
    assert fragment in str(err.value)


def test_fabric_missing_from_the_table_is_named():
    with pytest.raises(ValueError, match="no prices for fabric '25gbe'.*add an entry \"25GbE\""):
        HAND_PRICES.fabric("25gbe")


# ---- Pareto and recommendation -------------------------------------------------------------------

def _rows(*points, gpus=512, model="m"):
    return [{"model": model, "gpus": gpus, "network_usd": c, "scaling_factor": f, "fabric": name,
             "topology": "2-level fat tree", "bisection": "1", "algo": "ring", "images_per_s": 1000.0,
             "network_share": None} for name, c, f in points]


def test_pareto_frontier():
    rows = _rows(("a", 10, 0.80), ("b", 20, 0.90), ("c", 30, 0.85), ("d", 20, 0.90), ("e", 10, 0.70))
    rows += _rows(("x", 30, 0.85), gpus=64)  # another GPU count: judged on its own
    mark_pareto(rows)
    assert [r["pareto"] for r in rows] == [True, True, False, True, False, True]


def test_recommendation_target_budget_and_none():
    rows = _rows(("a", 10, 0.80), ("b", 20, 0.90), ("c", 30, 0.95), ("d", 20, 0.92))
    pick = lambda **kw: recommend(rows, **kw)[0]  # noqa: E731
    assert pick(target=0.9, budget_usd=None)["row"] == 3      # cheapest reaching 0.9; tie -> better scaling
    assert pick(target=0.9, budget_usd=None)["text"].startswith("m at 512 GPUs: the cheapest option that "
                                                                "reaches 0.90 is d,")
    assert pick(target=0.9, budget_usd=15)["row"] is None     # nothing reaches 0.9 for $15
    assert "no option reaches 0.90 within $15" in pick(target=0.9, budget_usd=15)["text"]
    assert pick(target=None, budget_usd=25)["row"] == 3       # best scaling within $25
    assert pick(target=None, budget_usd=None)["row"] == 3     # default target 0.9
    none = pick(target=0.99, budget_usd=None)
    assert none["row"] is None and "the best is c," in none["text"]


# ---- the simulator part --------------------------------------------------------------------------

def test_affine_cost_matches_direct_simulation_at_other_sizes():
    topo = fat_tree(hosts=64, hosts_per_leaf=16, bisection=Fraction("1/4"), link="25GbE", gpus_per_server=2)
    costs = CollectiveCosts(gamma_s_per_byte=V100_GAMMA_S_PER_BYTE)
    for algo, ranks in (("ring", 128), ("butterfly", 32)):
        placement = place(ranks, topo)
        cost = costs.cost(topo, algo, ranks, placement)
        for size in (1 << 20, 23_000_004, 400 << 20):
            direct = simulate("allreduce", algo, topo, ranks, size, placement=placement,
                              gamma_s_per_byte=V100_GAMMA_S_PER_BYTE).time_s
            assert cost(size) == pytest.approx(direct, rel=1e-5)


def test_equivalent_topologies_share_runs_and_others_do_not():
    costs = CollectiveCosts(gamma_s_per_byte=0.0)
    trees = {r: fat_tree(hosts=32, hosts_per_leaf=8, bisection=Fraction(r), link="100GbE", gpus_per_server=2)
             for r in ("1", "1/4")}
    ring = {r: costs.cost(t, "ring", 64, place(64, t)) for r, t in trees.items()}
    assert costs.num_simulations == 2  # a ring on consecutive ranks sends one flow per leaf up-link
    # ... and the shared answer is the 1/4 tree's own answer.
    direct = simulate("allreduce", "ring", trees["1/4"], 64, 64 << 20).time_s
    assert ring["1/4"](64 << 20) == pytest.approx(direct, rel=1e-9)
    fly = {r: costs.cost(t, "butterfly", 64, place(64, t)) for r, t in trees.items()}
    assert costs.num_simulations == 6  # butterfly loads the up-links: its own runs per bisection
    assert fly["1/4"](64 << 20) > 1.2 * fly["1"](64 << 20)
    random = costs.cost(trees["1"], "ring", 64, place(64, trees["1"], "random", seed=1))
    # Its own runs (and, where the level engine cannot vouch for its answer at the first size, the general
    # engine's too, which alone runs the second size).
    assert costs.num_simulations in (8, 9) and random(64 << 20) > ring["1"](64 << 20)


# ---- the whole plan ------------------------------------------------------------------------------

def _spec(**kw):
    base = dict(profiles=(load_profile("resnet50"),), gpus=(128,), fabrics=("100gbe",),
                bisections=(Fraction(1, 4),), prices=load_prices())
    base.update(kw)
    return PlanSpec(**base)


@pytest.mark.parametrize("gpus, fabric, ratio, algo, hosts_per_leaf", [
    (128, "100gbe", "1/4", "ring", 16),
    (32, "25gbe", "1/2", "butterfly", 8),
])
def test_plan_equals_whatif_on_the_same_point(gpus, fabric, ratio, algo, hosts_per_leaf):
    profile = load_profile("resnet50")
    result = run_plan(_spec(gpus=(gpus,), fabrics=(fabric,), bisections=(Fraction(ratio),), algos=(algo,),
                            hosts_per_leaf=hosts_per_leaf, levels=(2,)))
    (row,) = result.rows
    topo = fat_tree(hosts=gpus // 2, hosts_per_leaf=hosts_per_leaf, bisection=Fraction(ratio), link=fabric,
                    gpus_per_server=2)
    model = CostModel(kind="simulated", topology=topo, num_workers=gpus, algo=algo,
                      gamma_s_per_byte=V100_GAMMA_S_PER_BYTE, bandwidth_Bps=link_preset(fabric).bandwidth_Bps)
    whatif = simulate_iteration(profile, FusionPolicy(), model)
    assert row["scaling_factor"] == pytest.approx(whatif.scaling_factor, rel=1e-6)
    assert row["iteration_s"] == pytest.approx(whatif.iteration_s, rel=1e-6)
    assert row["images_per_s"] == pytest.approx(gpus * profile.batch_size / whatif.iteration_s, rel=1e-6)


def _v100_priced():
    from fabriclab.plan.prices import DEFAULT_PRICES

    data = json.loads(DEFAULT_PRICES.read_text())
    data["gpu_server_per_gpu"] = {"usd": 10000, "gpu": "V100", "source": "test"}
    return parse_prices(data)


def test_plan_rows_costs_and_shares():
    prices = _v100_priced()
    result = run_plan(_spec(gpus=(16, 128), fabrics=("25gbe", "100gbe"), bisections=(Fraction(1), Fraction(1, 4)),
                            prices=prices, algos=("ring",)))
    # 16 GPUs = 8 servers fit one leaf: one switch, bisection does not apply (one row per fabric).
    small = [r for r in result.rows if r["gpus"] == 16]
    assert [r["topology"] for r in small] == ["1 switch", "1 switch"]
    assert len(result.rows) == 2 + 4 and result.stats["num_topologies"] == 6
    for r in result.rows:
        p = prices.fabric(r["fabric"])
        assert r["network_usd"] == pytest.approx(r["servers"] * (p.nic.usd + p.host_cable.usd)
                                                 + r["num_switch_ports_bought"] * p.switch_port.usd
                                                 + r["num_switch_cables"] * p.switch_cable.usd)
        servers = r["gpus"] * prices.gpu_server_per_gpu.usd
        assert r["network_share"] == pytest.approx(r["network_usd"] / (r["network_usd"] + servers))
        assert r["usd_per_image_per_s"] == pytest.approx((r["network_usd"] + servers) / r["images_per_s"])
        assert 0 < r["scaling_factor"] <= 1
    # 25GbE scales worse than 100GbE at 128 GPUs on this model, and costs less.
    at = {(r["fabric"], r["bisection"]): r for r in result.rows if r["gpus"] == 128}
    assert at["25GbE", "1"]["scaling_factor"] < at["100GbE", "1"]["scaling_factor"]
    assert at["25GbE", "1"]["network_usd"] < at["100GbE", "1"]["network_usd"]
    assert len(result.recommendations) == 2


def test_plan_without_server_price_has_no_share():
    result = run_plan(_spec(prices=HAND_PRICES))
    (row,) = result.rows
    assert row["network_share"] is None and row["cluster_usd"] is None
    assert row["usd_per_image_per_s"] == pytest.approx(row["network_usd"] / row["images_per_s"])
    assert "of the cluster" not in result.recommendations[0]["text"]


@pytest.mark.parametrize("kw, fragment", [
    (dict(fabrics=("warp-drive",)), "unknown link preset"),
    (dict(fabrics=("10gbe",)), "no prices for fabric"),
    (dict(bisections=(Fraction(1, 32),)), "outside 1 .. 1/16"),
    (dict(bisections=(Fraction(2),)), "outside 1 .. 1/16"),
    (dict(gpus=(63,)), "multiples of --gpus-per-server 2"),
    (dict(levels=(4,)), "2 or 3 levels"),
    (dict(target=1.5), "(0, 1]"),
    (dict(budget_usd=-1.0), "budget"),
    (dict(node=NodeSpec(gpus_per_server=0)), "gpus per node"),
])
def test_bad_plan_inputs(kw, fragment):
    with pytest.raises(ValueError) as err:
        run_plan(_spec(**kw))
    assert fragment in str(err.value)


@pytest.mark.parametrize("ratio", [Fraction(1, 32), 0, 2, float("inf")])
def test_check_bisection_rejects(ratio):
    with pytest.raises((ValueError, OverflowError), match="bisection|Infinity"):
        check_bisection(ratio)


def test_check_bisection_takes_numbers_not_text():
    assert check_bisection(0.25) == Fraction(1, 4)
    with pytest.raises(TypeError, match="parse text"):
        check_bisection("1/4")


def test_infeasible_tree_options_are_skipped_with_the_reason():
    # 64 servers on 8-port switches at bisection 1/4: 2 levels take at most 8 x 6 = 48 NICs, 3 take 4 x 6 x 8.
    result = run_plan(_spec(gpus=(128,), levels=(2, 3), radix=8, algos=("ring",)))
    assert [r["levels"] for r in result.rows] == [3]
    assert len(result.skipped) == 1 and "2-level" in result.skipped[0] and "at most 48" in result.skipped[0]
    with pytest.raises(ValueError, match="no option could be built"):
        run_plan(_spec(gpus=(128,), levels=(2,), radix=8))
    with pytest.raises(ValueError, match="4 levels"):
        run_plan(_spec(gpus=(512,), radix=8))


def test_rows_are_json_clean():
    result = run_plan(_spec())
    text = json.dumps(result.rows, allow_nan=False)
    assert all(math.isfinite(r["scaling_factor"]) for r in json.loads(text))
    assert np.isfinite(result.stats["wall_s"])

"""Goodput of planned jobs (`plan/llm/goodput.py`): Llama 3 405B's run as published, the mean time to failure
against size as Meta's research clusters fit it, and the decisions goodput makes in a plan (dual ToR and spares
at 65,536 GPUs, spare racks on NVL72 racks whose domain the job spans)."""

import math
from dataclasses import replace

import numpy as np
import pytest

from fabriclab.fabric.domains import with_domain_gpus
from fabriclab.fabric.presets import cluster_preset
from fabriclab.fabric.resilience import ResilienceSpec
from fabriclab.plan.cluster import cluster_bill
from fabriclab.plan.llm.cluster import vary_cluster
from fabriclab.plan.llm.cost import network_prices, option_cost
from fabriclab.plan.llm.goodput import (answer_goodput, best_resilience, goodput_lines, goodput_row, job_components,
                                        resilience_choices)
from fabriclab.plan.prices import load_prices
from fabriclab.whatif.goodput.checkpoint import CheckpointPolicy
from fabriclab.whatif.goodput.domains import failure_domains
from fabriclab.whatif.goodput.rates import LLAMA3, RSC1, RSC1_PER_NODE_DAY, RSC2, RSC2_PER_NODE_DAY
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

DAYS = 54


def _run(cluster, gpus, gbs=2048, tp=8, pp=16):
    par = ParallelConfig(num_gpus=gpus, tp=tp, pp=pp, gbs=gbs, seq=8192, recompute="full")
    return simulate_llm(load_model("llama3-405b"), par, cluster)


@pytest.fixture(scope="module")
def llama3():
    """Llama 3 405B as Meta ran it: 16,384 H100s, TP8 PP16 DP128 (CP1 at 8K), 2,048 x 8,192 tokens a step."""
    cluster = cluster_preset("dgx-h100")
    return cluster, _run(cluster, 16384)


def test_llama3_405bs_interruptions_a_day_and_effective_training_time(llama3):
    cluster, answer = llama3
    g = answer_goodput(answer, cluster)
    assert g.unexpected_per_day == pytest.approx(419 / DAYS, rel=0.02)  # published: 419 unexpected in 54 days
    assert g.interruptions_per_day == pytest.approx(466 / DAYS, rel=0.02)  # 466 with the 47 planned
    assert g.effective_training_time > 0.90  # published: "higher than 90 % effective training time"
    assert g.checkpoint.total_bytes == pytest.approx(405.85e9 * 14, rel=0.01)
    assert g.mttf_s / 3600 == pytest.approx(54 * 24 / 419, rel=0.02)


def test_meta_research_clusters_rates_bracket_the_llama3_run(llama3):
    cluster, answer = llama3
    high, low = (answer_goodput(answer, cluster, rates=r) for r in (RSC1, RSC2))
    assert low.unexpected_per_day < 419 / DAYS < high.unexpected_per_day
    own = answer_goodput(answer, cluster).effective_training_time
    assert high.effective_training_time < own < low.effective_training_time


def test_an_asynchronous_checkpoint_keeps_more_and_a_slow_restart_less(llama3):
    cluster, answer = llama3
    sync = answer_goodput(answer, cluster)
    assert answer_goodput(answer, cluster, policy=CheckpointPolicy(asynchronous=True)).effective_training_time \
        > sync.effective_training_time
    assert answer_goodput(answer, cluster, policy=CheckpointPolicy(restart_s=1800)).effective_training_time \
        < sync.effective_training_time - 0.05


@pytest.mark.parametrize("name", ["dgx-h100", "hgx-b200", "gb200-nvl72"])
def test_the_mean_time_to_failure_falls_as_one_over_the_gpus_as_metas_fit(name):
    cluster = cluster_preset(name)
    g = cluster.server.gpus_per_domain or cluster.server.gpus_per_server
    sizes = [g * 2 ** k for k in range(4, 12)]  # 128 to 16,384 servers or racks of 8; 1,152 to 147,456 on NVL72
    mttf = []
    for n in sizes:
        domains = failure_domains(job_components(cluster, n), LLAMA3, cluster.resilience)
        mttf.append(1 / sum(d.failures_per_hour for d in domains if d.stops_job))
    slope = np.polyfit(np.log(sizes), np.log(mttf), 1)[0]
    assert slope == pytest.approx(-1.0, abs=0.02)  # Kokolis et al.: MTTF proportional to 1 / GPUs
    if name == "dgx-h100":
        for n, hours in zip(sizes, mttf):  # within their two clusters' fits, at every size
            nodes = n / 8
            assert 24 / (nodes * RSC1_PER_NODE_DAY) < hours < 24 / (nodes * RSC2_PER_NODE_DAY)


def test_a_jobs_parts_are_counted_as_its_price_counts_them():
    cluster = cluster_preset("dgx-h100")
    comps = job_components(cluster, 1024)
    bill, levels = cluster_bill(cluster, 128)
    assert levels == 2 and comps.num_leaves + comps.num_spine_switches == bill.num_switches
    assert comps.num_switch_cables == bill.num_switch_cables and comps.num_nics == 1024
    alone = job_components(cluster, 8)  # one server: NVLink only, no network in the job
    assert alone.num_leaves == alone.num_nics == alone.num_spine_switches == 0
    plain = job_components(vary_cluster(cluster, fabric="fat-tree"), 1024)
    assert comps.servers_per_leaf == 32 and plain.servers_per_leaf == 4


@pytest.mark.parametrize("gpus", [1024, 4096, 8192])
def test_the_leaves_are_the_bills_where_a_wide_radix_keeps_two_levels(gpus):
    cluster = cluster_preset("hgx-b200")  # 144-port XDR switches: leaves may be wider than the cluster's 32 ports
    comps, (bill, levels) = job_components(cluster, gpus), cluster_bill(cluster, gpus // 8)
    assert levels == 2 and comps.num_leaves + comps.num_spine_switches == bill.num_switches
    assert comps.num_leaves * comps.servers_per_leaf >= gpus // 8 * 8  # every NIC on a leaf (one per rail)


@pytest.fixture(scope="module")
def at_65536():
    cluster = cluster_preset("dgx-h100")
    answer = _run(cluster, 65536)
    table = load_prices()
    return cluster, answer, option_cost(cluster, 65536, table), network_prices(cluster, table)[0]


def test_at_65536_gpus_goodput_buys_spares_and_on_rails_dual_tor(at_65536):
    cluster, answer, row, prices = at_65536
    choices = resilience_choices(answer, cluster, row, prices)
    built = choices[0]
    assert not built.resilience.dual_tor and built.resilience.spare_servers == 0
    assert built.goodput.effective_training_time < 0.01  # every failure waits a day for its repair
    best = best_resilience(choices)
    single = best_resilience([c for c in choices if not c.resilience.dual_tor])
    assert best.resilience.dual_tor and best.usd_per_goodput < single.usd_per_goodput
    # a rail leaf takes 32 servers: one ToR needs more spares than two
    assert single.resilience.spare_servers > best.resilience.spare_servers > 0
    assert best.extra_usd > 0 and best.goodput.effective_training_time > single.goodput.effective_training_time
    row = {**row, **goodput_row(answer, cluster, row, prices), "option": "rail", "parallel": "TP8 PP16", "gpus": 65536,
           "tokens_per_s": answer.tokens_per_s}
    lines = goodput_lines([row], "llama3-405b")
    assert "by goodput per dollar" in lines[0] and "best: dual ToR" in lines[-1]


def test_a_cluster_file_that_names_its_spares_and_tors_keeps_them(at_65536):
    cluster, answer, row, prices = at_65536
    fixed = replace(cluster, resilience=ResilienceSpec(dual_tor=True, spare_servers=96))
    choices = resilience_choices(answer, fixed, row, prices)
    assert [(c.resilience.dual_tor, c.resilience.spare_servers) for c in choices] == [(True, 96)]
    leaves = job_components(cluster, 65536).num_leaves  # a second leaf per leaf, a second cable per NIC
    dual = leaves * row["switch_radix"] * prices.switch_port.usd + 65536 * prices.host_cable.usd
    assert choices[0].extra_usd == pytest.approx(96 * row["cluster_usd"] / row["servers"] + dual)  # priced


def test_on_nvl72_racks_a_job_spanning_the_rack_needs_spare_racks_and_free_trays_stand_in():
    full = cluster_preset("gb200-nvl72")
    part = with_domain_gpus(full, 64)
    table = load_prices()
    answers = {"72": (full, _run(full, 18432, gbs=2304)), "64": (part, _run(part, 16384))}
    built = {}
    for key, (cluster, answer) in answers.items():
        row = option_cost(cluster, answer.par.num_gpus, table)
        choices = resilience_choices(answer, cluster, row, network_prices(cluster, table)[0])
        built[key] = choices[0].goodput.effective_training_time
        if key == "72":
            spares = best_resilience(choices).resilience.spare_servers
            assert spares % 18 == 0 and spares >= 18  # whole racks of 18 trays
    assert built["72"] < 0.01 < 0.5 < built["64"]  # without spares: a tray stops its rack / a free tray stands in
    assert math.isfinite(built["64"])

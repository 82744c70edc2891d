"""The LLM plan: the search space, memory pruning, the fast evaluator against `simulate_llm`, its lower
bounds, the bounded search against the exhaustive one, prices and the plan's rows (small GPU counts)."""

import json
import random
from dataclasses import replace
from fractions import Fraction

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.plan.llm import LlmPlanRequest, build_options, default_gbs, names_llm, run_llm_plan
from fabriclab.plan.llm.cost import option_cost
from fabriclab.plan.llm.evaluator import Evaluator
from fabriclab.plan.llm.space import enumerate_configs, fit_configs, memory_needs
from fabriclab.plan.prices import EXTRA_FABRIC_PRICES, SERVER_PRICE_PER_GPU, load_prices
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.workload.memory import memory_per_gpu
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")


def request(model="llama3-8b", gpus=(64,), clusters=("dgx-h100",), **kw):
    kw.setdefault("gbs", 256)
    kw.setdefault("seq", 4096)
    return LlmPlanRequest(model=model, gpus=gpus, clusters=tuple((c, cluster_preset(c)) for c in clusters), **kw)


def fitted(model, gpus, gbs, seq, cluster=H100):
    spec = load_model(model)
    space = enumerate_configs(spec, gpus, cluster.server.gpus_per_server, gbs=gbs, seq=seq)
    return spec, space, fit_configs(space, memory_needs(spec, space), cluster.compute.gpu.memory_bytes)


def test_the_plan_picks_a_configuration_that_fits_and_beats_a_poor_hand_picked_one():
    result = run_llm_plan(request())
    (row,) = result.rows
    assert row["memory_per_gpu_bytes"] <= H100.compute.gpu.memory_bytes
    spec = load_model("llama3-8b")
    poor = ParallelConfig(num_gpus=64, tp=1, pp=8, cp=1, mbs=1, gbs=256, seq=4096, recompute="full")
    answer = simulate_llm(spec, poor, H100)  # fits (no ValueError), and is slower
    assert row["tokens_per_s"] > 1.1 * answer.tokens_per_s
    assert row["step_time_s"] == pytest.approx(min(c["step_time_s"] for c in result.configs))
    assert not row["efficiency_measured"] and "not measured" in row["efficiency_source"]


def test_memory_pruning_refuses_a_configuration_too_large_and_never_simulates_it():
    spec, space, fit = fitted("llama3-70b", 64, 256, 4096)
    big = next(p for p in space if p.tp == 1 and p.pp == 1 and p.zero == 1 and p.recompute == "none")
    assert memory_per_gpu(spec, big).total_bytes > H100.compute.gpu.memory_bytes
    assert big not in [par for par, _ in fit.configs]
    assert all(m.total_bytes <= H100.compute.gpu.memory_bytes for _, m in fit.configs)
    assert fit.smallest[0] == min(memory_per_gpu(spec, p).total_bytes for p in space)
    result = run_llm_plan(request("llama3-70b"))
    assert result.rows[0]["num_fit"] == len(fit.configs) < len(space) == result.rows[0]["num_enumerated"]
    assert all(c["memory_per_gpu_bytes"] <= H100.compute.gpu.memory_bytes for c in result.configs)


def test_a_model_that_fits_nowhere_says_its_smallest_memory_need():
    with pytest.raises(ValueError, match=r"llama3-405b fits no configuration.*smallest need found is \d+\.\d GB"):
        run_llm_plan(request("llama3-405b", gpus=(8,)))
    result = run_llm_plan(request("llama3-70b", gpus=(8, 64)))  # 8 GPUs: too few, 64: fits
    assert [u["gpus"] for u in result.unfit] == [8] and result.unfit[0]["smallest_need_bytes"] > 80e9
    assert [r["gpus"] for r in result.rows] == [64]
    assert any("8 GPUs: fits on no option" in text for text in result.recommendations)


def test_a_moe_model_gets_expert_parallel_configurations():
    spec, space, fit = fitted("mixtral-8x7b", 64, 128, 4096)
    eps = {p.ep for p in space}
    assert eps == {1, 2, 4, 8}
    # folded over the stage's TP x CP x DP, with ETP 1 (Megatron-Bridge's) or TP (Megatron-LM's default)
    assert all((p.tp * p.dp * p.cp) % (p.etp * p.ep) == 0 and spec.num_experts % p.ep == 0 for p in space)
    assert {p.etp for p in space} == {1, 2, 4, 8} and all(p.etp in (1, p.tp) for p in space)
    assert any(p.ep > p.dp * p.cp for p in space)  # EP over TP's ranks too: only folding allows it
    assert {(p.ep, p.etp) for p in enumerate_configs(load_model("llama3-8b"), 64, 8, gbs=256, seq=4096)} == {(1, 1)}
    par = next(p for p, _ in fit.configs if p.ep == 8)
    answer = Evaluator(spec, H100).simulate(par)
    assert answer.result.split_s["ep"] > 0


def test_800g_is_never_slower_than_400g_for_the_same_configuration():
    spec, _, fit = fitted("llama3-70b", 128, 256, 8192)
    slow = Evaluator(spec, replace(H100, server=replace(H100.server, nic_bandwidth_Bps=50e9)))
    fast = Evaluator(spec, replace(H100, server=replace(H100.server, nic_bandwidth_Bps=100e9)))
    sample = random.Random(3).sample(fit.configs, 12)
    for par, memory in sample:
        assert fast.simulate(par, memory).step_time_s <= slow.simulate(par, memory).step_time_s * (1 + 1e-12)
    rows = run_llm_plan(request("llama3-70b", gpus=(128,), nic_rates_Bps=(50e9, 100e9), gbs=256, seq=8192)).rows
    assert rows[1]["tokens_per_s"] >= rows[0]["tokens_per_s"] * (1 - 1e-12)
    assert rows[1]["network_usd"] > rows[0]["network_usd"]


def test_the_evaluator_answers_what_simulate_llm_answers_and_its_bounds_hold():
    for model, cluster, gpus, gbs, seq in (("llama3-8b", "dgx-h100", 64, 256, 8192),
                                           ("mixtral-8x7b", "hgx-h200", 64, 128, 4096),
                                           ("gpt3-175b", "dgx-a100", 128, 256, 2048)):
        c = cluster_preset(cluster)
        spec, _, fit = fitted(model, gpus, gbs, seq, c)
        ev = Evaluator(spec, c)
        for par, memory in random.Random(1).sample(fit.configs, 6):
            ours = ev.simulate(par, memory)  # TP overlap on or off, whichever is faster
            ref = simulate_llm(spec, par, c, options=ours.result.model.options)
            other = replace(ours.result.model.options, tp_overlap=not ours.result.model.options.tp_overlap)
            if par.tp > 1:
                assert simulate_llm(spec, par, c, options=other).step_time_s >= ours.step_time_s * (1 - 1e-12)
            assert ours.step_time_s == pytest.approx(ref.step_time_s, rel=1e-12)
            assert ours.mfu == pytest.approx(ref.mfu, rel=1e-12)
            assert ev.compute_bound_s(par) <= ev.lower_bound_s(par) * (1 + 1e-12)
            assert ev.lower_bound_s(par) <= ours.step_time_s * (1 + 1e-9)


def test_the_bounded_search_finds_the_exhaustive_best():
    small = dict(gpus=(16, 32), nic_rates_Bps=(50e9, 100e9), gbs=32, seq=2048)
    bounded = run_llm_plan(request("llama3-70b", **small))
    full = run_llm_plan(request("llama3-70b", **small, exhaustive=True))
    assert [r["step_time_s"] for r in bounded.rows] == [r["step_time_s"] for r in full.rows]
    assert bounded.stats["num_simulated"] < full.stats["num_simulated"] == full.stats["num_fit"]
    assert len(full.configs) == full.stats["num_fit"]


def test_max_configs_cuts_the_search_and_says_so():
    (row,) = run_llm_plan(request("llama3-70b", max_configs=2, exhaustive=True)).rows
    assert row["num_simulated"] == 2 and row["search_cut"]


def test_rows_are_priced_with_sources_and_the_frontier_is_marked():
    result = run_llm_plan(request(gpus=(64, 128), clusters=("dgx-h100", "hgx-h200"), nic_rates_Bps=(50e9, 100e9)))
    assert len(result.rows) == 8
    for r in result.rows:
        assert r["cluster_usd"] == pytest.approx(r["servers_usd"] + r["network_usd"])
        assert r["usd_per_token_per_s"] == pytest.approx(r["cluster_usd"] / r["tokens_per_s"])
        assert r["server_price_source"] and r["network_prices_from"]
    front = [r for r in result.rows if r["pareto"]]
    assert front and all(not (o["cluster_usd"] <= f["cluster_usd"] and o["tokens_per_s"] > f["tokens_per_s"])
                         for f in front for o in result.rows)
    assert len(result.recommendations) == 2 and "lowest cost per token/s" in result.recommendations[0]
    budget = run_llm_plan(request(gpus=(64,), budget_usd=1.0))
    assert "no option fits $1" in budget.recommendations[0]


def test_prices_carry_their_source_and_800g_costs_more_than_400g():
    assert all(p.source for p in SERVER_PRICE_PER_GPU.values())
    assert all(p.source.startswith("estimate") for k, p in SERVER_PRICE_PER_GPU.items() if k[:4] in ("H200", "B200"))
    assert all(getattr(EXTRA_FABRIC_PRICES["XDR"], item).source.startswith("estimate")
               for item in ("nic", "switch_port", "host_cable", "switch_cable"))
    table = load_prices()
    c400 = option_cost(H100, 1024, table)
    c800 = option_cost(replace(H100, server=replace(H100.server, nic_bandwidth_Bps=100e9)), 1024, table)
    assert c400["servers"] == 128 and c400["servers_usd"] == 1024 * 37_500
    assert c400["priced_fabric"] == "NDR" and c800["priced_fabric"] == "XDR"
    assert c800["network_usd"] > c400["network_usd"]
    with pytest.raises(ValueError, match="no priced fabric runs at 300 Gb/s"):
        option_cost(replace(H100, server=replace(H100.server, nic_bandwidth_Bps=37.5e9)), 64, table)


def test_options_requests_and_model_names(tmp_path):
    options = build_options(request(nic_rates_Bps=(50e9, 100e9), fabrics=("rail", "fat-tree"),
                                    bisections=(Fraction(1), Fraction(1, 2))))
    assert len(options) == 8 and options[-1].label == "dgx-h100 fat-tree 800G 1/2"
    assert options[-1].cluster.network.bisection == 0.5 and options[-1].cluster.server.nic_bandwidth_Bps == 100e9
    with pytest.raises(ValueError, match="rail or fat-tree"):
        build_options(request(fabrics=("400g-ndr",)))
    with pytest.raises(ValueError, match="--gpus 60 is not a multiple of 8"):
        run_llm_plan(request(gpus=(60,)))
    assert default_gbs(8192) == 2048 and default_gbs(2048) == 8192
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8}))
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"model": "m", "grads": []}))
    assert names_llm("llama3-70b") and names_llm(str(config)) and names_llm(str(tmp_path))
    assert not names_llm("resnet50") and not names_llm(str(profile)) and not names_llm("nothing.json")

"""The LLM step simulator: compute against its closed form, each communicator where it must appear,
the network's effect, the split, calibration and the exports."""

import json
from dataclasses import replace

import pytest

from fabriclab.fabric.cluster import cluster_gpu
from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.comm import group_shape
from fabriclab.whatif.llm.run import calibrate_efficiency, simulate_llm
from fabriclab.whatif.llm.step import StepOptions
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")
LLAMA8 = load_model("llama3-8b")


def par(**kw):
    base = dict(num_gpus=16, tp=1, pp=1, mbs=1, gbs=32, seq=2048, recompute="selective")
    base.update(kw)
    return ParallelConfig(**base)


def test_one_gpu_runs_its_model_flops_at_the_given_efficiency():
    p = par(num_gpus=1, gbs=16, seq=1024, recompute="none", zero=0)
    a = simulate_llm(LLAMA8, p, H100, efficiency=0.5, check_memory=False)
    peak = cluster_gpu(H100).peak_flops["bf16"]
    flops = LLAMA8.model_flops_per_token(p.seq) * p.tokens_per_step
    assert a.result.split_s["compute"] == pytest.approx(flops / (0.5 * peak), rel=1e-9)
    assert a.step_time_s == pytest.approx(a.result.split_s["compute"] + a.result.optimizer_s, rel=1e-9)
    # MFU: the efficiency, less the optimizer step's share (memory bound)
    assert a.mfu == pytest.approx(0.5 * a.result.split_s["compute"] / a.step_time_s, rel=1e-6)


def test_the_split_adds_up_to_the_step():
    a = simulate_llm(LLAMA8, par(num_gpus=32, tp=2, pp=2, vp=2, cp=2, gbs=32, seq=4096), H100, efficiency=0.5)
    assert sum(a.result.split_s.values()) == pytest.approx(a.step_time_s, rel=1e-9)
    for kind in ("compute", "tp", "pp", "bubble"):
        assert a.result.split_s[kind] > 0, kind
    # the ring exchange of keys and values hides behind the attention core at 4k tokens
    assert any(e["communicator"] == "cp" for e in a.result.comm) and a.result.split_s["cp"] == 0


def test_each_communicator_talks_only_when_its_parallelism_is_on():
    plain = simulate_llm(LLAMA8, par(), H100, efficiency=0.5)
    talked = {e["communicator"] for e in plain.result.comm}
    assert talked == {"dpcp"}
    tp = simulate_llm(LLAMA8, par(tp=2), H100, efficiency=0.5)
    assert {"tp", "dpcp"} <= {e["communicator"] for e in tp.result.comm}
    moe = simulate_llm(load_model("mixtral-8x7b"), par(num_gpus=64, tp=2, pp=2, ep=8, gbs=64), H100,
                       efficiency=0.5)
    kinds = {e["communicator"] for e in moe.result.comm}
    assert {"ep", "edp", "pp", "tp"} <= kinds and moe.result.split_s["ep"] > 0


def test_placement_puts_tp_inside_a_server_and_pp_across():
    p = ParallelConfig(num_gpus=128, tp=4, pp=8, vp=6, gbs=256, seq=2048)
    assert group_shape(p, "tp", 8).num_servers == 1
    assert (group_shape(p, "dp", 8).num_servers, group_shape(p, "dp", 8).per_server) == (2, 2)
    assert (group_shape(p, "pp", 8).num_servers, group_shape(p, "pp", 8).per_server) == (8, 1)
    q = replace(p, order="dp-tp-cp-pp")
    assert group_shape(q, "tp", 8).num_servers == 2  # dp (4) innermost: TP ranks 4 apart


def test_a_faster_network_never_slows_the_step_and_an_oversubscribed_one_slows_all_to_all():
    p = par(num_gpus=256, tp=2, pp=2, ep=8, gbs=256)
    mix = load_model("mixtral-8x7b")
    slow = replace(H100, server=replace(H100.server, nic_bandwidth_Bps=25e9))
    fast = replace(H100, server=replace(H100.server, nic_bandwidth_Bps=100e9))
    a_slow, a_fast = (simulate_llm(mix, p, c, efficiency=0.5) for c in (slow, fast))
    assert a_fast.step_time_s <= a_slow.step_time_s
    thin = replace(H100, network=replace(H100.network, fabric="fat-tree", bisection=0.25))
    # EP ranks 8 GPUs apart (PP before DP; ETP = TP keeps the pipeline groups of both grids the same): one per
    # server, 8 servers on two 32-port leaves of the fat tree
    spread = replace(p, pp=4, order="tp-cp-pp-dp", etp=2)
    a_thin = simulate_llm(mix, spread, thin, efficiency=0.5)
    a_rail = simulate_llm(mix, spread, H100, efficiency=0.5)
    thin_ep, rail_ep = (next(e["time_s"] for e in a.result.comm if e["communicator"] == "ep") for a in (a_thin, a_rail))
    assert thin_ep > rail_ep


def test_memory_that_does_not_fit_is_refused_with_the_numbers():
    with pytest.raises(ValueError, match="does not fit"):
        simulate_llm(load_model("llama3-70b"), par(num_gpus=8, gbs=8, zero=0, recompute="none"), H100)


def test_calibration_finds_the_efficiency_a_step_was_simulated_with():
    p = par(num_gpus=16, tp=2, pp=2, gbs=32)
    target = simulate_llm(LLAMA8, p, H100, efficiency=0.37).step_time_s
    value, answer = calibrate_efficiency(LLAMA8, p, H100, target, flat=True)
    assert value == pytest.approx(0.37, rel=1e-3)
    assert answer.step_time_s == pytest.approx(target, rel=1e-3)
    with pytest.raises(ValueError, match="faster than this model allows"):
        calibrate_efficiency(LLAMA8, p, H100, target / 10, flat=True)


def test_calibration_finds_the_scale_on_the_kernel_model_a_step_was_simulated_with():
    p = par(num_gpus=16, tp=2, pp=2, gbs=32)
    target = simulate_llm(LLAMA8, p, H100, scale=0.8).step_time_s
    value, answer = calibrate_efficiency(LLAMA8, p, H100, target)
    assert value == pytest.approx(0.8, rel=1e-3)
    assert answer.efficiency.model == "kernels"
    assert answer.step_time_s == pytest.approx(target, rel=1e-3)
    with pytest.raises(ValueError, match="faster than this model allows"):
        calibrate_efficiency(LLAMA8, p, H100, target / 10)


def test_fp8_is_faster_but_not_twice_because_attention_stays_in_bf16():
    bf16 = simulate_llm(LLAMA8, par(), H100, efficiency=0.5)
    fp8 = simulate_llm(LLAMA8, par(precision="fp8"), H100, efficiency=0.5)
    assert bf16.result.split_s["compute"] / 2 < fp8.result.split_s["compute"] < bf16.result.split_s["compute"]


def test_exports_a_graph_per_rank_and_a_trace(tmp_path):
    from fabriclab.whatif.llm.export import rank_graphs, stage_graphs
    from fabriclab.whatif.llm.trace import write_trace

    a = simulate_llm(LLAMA8, par(num_gpus=32, tp=2, pp=4, gbs=64), H100, efficiency=0.5)
    graphs = rank_graphs(a)
    assert [g.rank for g in graphs] == list(range(32))
    assert [g.rank for g in stage_graphs(a)] == a.par.groups("pp")[0]
    stage_of = a.par.coordinates()["pp"]
    for g in graphs:
        s = int(stage_of[g.rank])
        compute = sum(c.compute_s for (st, _, _), c in a.result.passes.items() if st == s) * a.par.num_microbatches
        assert sum(op.duration_s for op in g.ops if op.kind == "compute") == pytest.approx(compute + a.result.optimizer_s)
        assert g.communicators["tp"] == next(grp for grp in a.par.groups("tp") if g.rank in grp)
        for op in g.ops:  # pipeline messages go to the neighbouring stages of the rank's own pipeline
            if op.communicator == "pp":
                assert op.peer in g.communicators["pp"] and abs(int(stage_of[op.peer]) - s) == 1
    # every send has its receive: same count per ordered pair of ranks
    sends = sorted((g.rank, op.peer) for g in graphs for op in g.ops if op.collective == "send")
    recvs = sorted((op.peer, g.rank) for g in graphs for op in g.ops if op.collective == "recv")
    assert sends == recvs and sends
    s = a.result.slowest_stage
    trace = write_trace(a, tmp_path / "t.json")
    assert json.loads((tmp_path / "t.json").read_text()) == trace
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert {"compute", "tp", "dp"} <= names
    spans = [e for e in trace["traceEvents"] if e.get("tid") == 0 and e["ph"] == "X" and e["cat"] != "layer"]
    assert len(spans) == 2 * a.par.num_microbatches and trace["otherData"]["stages"] == [s]
    every = write_trace(a, tmp_path / "all.json", stages="all")
    assert {e["pid"] for e in every["traceEvents"]} == set(range(4))

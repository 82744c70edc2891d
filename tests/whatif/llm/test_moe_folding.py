"""MoE as Megatron-Core runs it, in the step program and everything that reads it: the experts' groups folded
over a stage, the three dispatchers on their communicators (sizes, link loads, Chakra export), selective
recomputation of named modules, activation offloading to host memory and what it costs when the compute
cannot hide it."""

from dataclasses import replace

import pytest

from fabriclab.fabric.presets import cluster_preset
from fabriclab.whatif.llm.export import rank_graphs
from fabriclab.whatif.llm.links import link_loads
from fabriclab.whatif.llm.program import Call, Work, build_program, ProgramOptions
from fabriclab.whatif.llm.run import simulate_llm
from fabriclab.whatif.llm.schedule import B, F
from fabriclab.whatif.llm.step import StepOptions
from fabriclab.workload.memory import layer_activation_bytes, memory_per_gpu, memory_per_stage
from fabriclab.workload.parallel import ParallelConfig
from fabriclab.workload.transformer import load_model

H100 = cluster_preset("dgx-h100")
DSV3 = load_model("deepseek-v3")
MIX = load_model("mixtral-8x7b")


def calls(program, stage=0, chunk=0, kind=F, tp=False):
    """The calls of the first MoE layer's pass (without attention's TP calls unless `tp`)."""
    passes = program.chunk(stage, chunk).passes(kind)
    lp = next(p for p in passes if p.layer >= 0 and program.spec.is_moe_layer(p.layer))
    return [op for op in lp.ops if isinstance(op, Call) and (tp or op.communicator != "tp")]


def test_each_dispatcher_runs_on_its_communicators():
    par = ParallelConfig(num_gpus=64, tp=2, ep=8, etp=2, gbs=64, seq=4096)
    tokens = 4096 / 2 * 2 * 4096 * 2  # a rank's share of the sequence, top-2 copies, h, bf16
    a2a = {}
    for c in calls(build_program(MIX, par)):
        a2a.setdefault(c.communicator, c)  # the dispatch's, before the combine's
    assert a2a["ep"].collective == "alltoall" and a2a["ep"].size_bytes == pytest.approx(tokens)
    assert a2a["etp"].collective == "allgather" and a2a["etp"].size_bytes == pytest.approx(2 * tokens)
    # no shared experts: the router takes a rank's share of the sequence as it is, TP gathers attention's only
    assert [c.name for c in calls(build_program(MIX, par), tp=True) if c.communicator == "tp"] == [
        "tp.allgather.attention", "tp.reduce_scatter.attention"]
    gather = calls(build_program(MIX, par, ProgramOptions(moe_dispatcher="allgather")))
    assert [(c.communicator, c.collective) for c in gather] == [("etpep", "allgather"), ("etpep", "reduce_scatter")]
    assert gather[0].size_bytes == pytest.approx(tokens / 2 * 16)  # every token to the 16 ranks of ETP x EP
    deep = calls(build_program(MIX, par, ProgramOptions(moe_dispatcher="deepep", ep_domains=2)))
    assert [c.communicator for c in deep] == ["ep_inter", "ep_intra", "ep_intra", "ep_inter"]
    # a token crosses to each of 2 domains holding one of its 2 experts of 8 at most once
    reached = 1 - (4 / 8) * (3 / 7)
    assert deep[0].size_bytes == pytest.approx(2 * tokens / 2 * reached)
    with pytest.raises(ValueError, match="--moe-dispatcher 'flex'"):
        build_program(MIX, par, ProgramOptions(moe_dispatcher="flex"))


def test_deepep_sends_fewer_bytes_across_servers_than_the_all_to_all():
    par = ParallelConfig(num_gpus=64, ep=64, gbs=64, seq=4096, pp=1)
    crossing = {}
    for how in ("alltoall", "deepep"):
        answer = simulate_llm(DSV3, par, H100, options=StepOptions(moe_dispatcher=how), check_memory=False)
        topology, loads = link_loads(answer)
        names = topology.node_names
        nic = [i for i in range(topology.num_links) if ".nic" in names[topology.link_src[i]]
               and "leaf" in names[topology.link_dst[i]]]
        crossing[how] = sum(v[nic].sum() for v in loads.values())
        assert answer.result.split_s["ep"] > 0
    assert crossing["deepep"] < 0.8 * crossing["alltoall"]


def test_the_export_names_every_group_of_the_folded_step():
    par = ParallelConfig(num_gpus=16, tp=2, ep=8, gbs=16, seq=1024)
    answer = simulate_llm(MIX, par, H100, options=StepOptions(moe_dispatcher="deepep"), check_memory=False)
    graph = rank_graphs(answer, ranks=[3])[0]
    assert graph.communicators["ep"] == list(range(8)) and graph.communicators["ep_intra"] == list(range(8))
    assert graph.communicators["ep_inter"] == [3]  # EP8 inside one server: no RDMA step
    assert any(op.communicator == "ep_intra" for op in graph.ops if op.kind == "comm")


def test_recompute_modules_free_what_they_run_again():
    base = ParallelConfig(num_gpus=256, pp=4, ep=64, gbs=256, seq=4096, recompute="selective")
    keep = memory_per_gpu(DSV3, base).activations_bytes
    for modules in (("layernorm",), ("moe_act",), ("mla_up_proj",), ("moe",), ("mla_up_proj", "moe_act")):
        par = replace(base, recompute_modules=modules)
        assert memory_per_gpu(DSV3, par).activations_bytes < keep, modules
        again = [op.name for op in build_program(DSV3, par).chunk(1, 0).backward[0].ops if isinstance(op, Work)]
        assert any(name.startswith("recompute.") for name in again), modules
    moe = replace(base, recompute_modules=("moe",))  # the whole MoE layer again: its dispatch and combine too
    names = [op.name for op in build_program(DSV3, moe).chunk(1, 0).backward[0].ops]
    assert "recompute.ep.alltoall.dispatch" in names and "recompute.experts" in names
    # fp8 keeps the GEMMs' inputs in one byte
    assert memory_per_gpu(DSV3, replace(base, precision="fp8")).activations_bytes < keep


def test_offloaded_activations_leave_the_gpu_and_cost_what_the_compute_does_not_hide():
    spec = load_model("llama3-70b")
    par = ParallelConfig(num_gpus=64, tp=1, zero=3, gbs=256, seq=8192)
    off = replace(par, offload_layers=20)
    freed = memory_per_gpu(spec, par).activations_bytes - memory_per_gpu(spec, off).activations_bytes
    assert freed == pytest.approx(19 * layer_activation_bytes(spec, par))  # one layer stays in flight
    program = build_program(spec, off)
    fwd, bwd = program.chunk(0, 0).forward, program.chunk(0, 0).backward
    copies = [op for lp in (*fwd, *bwd) for op in lp.ops if isinstance(op, Call) and op.communicator == "host"]
    assert len(copies) == 40 and {c.name for c in copies} == {"host.offload", "host.reload"}
    gb200 = cluster_preset("gb200-nvl72")
    fast = simulate_llm(spec, off, gb200, check_memory=False)
    plain = simulate_llm(spec, par, gb200, check_memory=False)
    gpu = gb200.compute.gpu
    slow = replace(gb200, compute=replace(gb200.compute, gpu=replace(gpu, host_bandwidth_Bps=2e9)))
    crawl = simulate_llm(spec, off, slow, check_memory=False)
    assert fast.step_time_s == pytest.approx(plain.step_time_s, rel=0.02)  # C2C: hidden behind the compute
    assert crawl.step_time_s > 1.2 * plain.step_time_s  # 2 GB/s: the copies cost time


def test_dense_jobs_run_as_before_folding():
    # EP = ETP = 1: no expert groups to cost, the same calls and groups as attention's grid alone
    par = ParallelConfig(num_gpus=32, tp=2, pp=2, gbs=32, seq=2048)
    program = build_program(load_model("llama3-8b"), par)
    comms = {op.communicator for s in range(2) for lp in program.chunk(s, 0).passes(F) + program.chunk(s, 0).passes(B)
             for op in lp.ops if isinstance(op, Call)}
    assert comms == {"tp"}
    assert par._costed() == ("tp", "cp", "dp", "pp")


def test_the_mtp_module_is_held_on_the_last_stage():
    par = ParallelConfig(num_gpus=256, pp=4, ep=64, gbs=256, seq=4096, recompute="selective")
    plain = replace(DSV3, mtp_layers=0)
    with_mtp, without = memory_per_stage(DSV3, par), memory_per_stage(plain, par)
    dense, expert = DSV3.layer_params(DSV3.num_layers - 1)
    assert [w.num_params - o.num_params for w, o in zip(with_mtp, without)][:3] == [0, 0, 0]
    assert with_mtp[-1].num_params - without[-1].num_params == pytest.approx(DSV3.mtp_params() - expert + expert / 64)
    assert with_mtp[-1].activations_bytes > without[-1].activations_bytes
